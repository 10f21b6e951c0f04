#pragma once
// A persistent pool of worker threads for data-parallel kernels. parallel_for gives each thread
// (the calling thread works too; at most one per grain) a contiguous share of [0, n), which it claims front to back in
// shrinking chunks; a thread done with its share takes chunks from the back of the others'. So
// each thread's claims follow one another in memory wherever the items are laid out in order (the
// row blocks of a GEMV: one memory stream per thread, where claims handed out from one counter
// interleaved the threads and restarted both streams at every claim), and the threads still finish
// together. Dispatch does not allocate, so it is safe on the per-token path.
//
// Between dispatches a worker spins (with a CPU pause) for up to spin_us microseconds before it
// sleeps on a condition variable: a decode step issues dozens of dispatches a few microseconds
// apart, and a sleeping worker costs a context switch and a scheduler wake-up (tens of
// microseconds) on every one of them. The caller waits for the workers the same way. Past the
// spin budget everyone sleeps, so an idle pool costs no CPU.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

class ThreadPool {
 public:
  // Microseconds a worker (and a waiting caller) spins before sleeping.
  static constexpr int kDefaultSpinMicros = 300;

  // n_threads counts the caller: 1 means "run everything inline"; 0 or less: default_threads().
  // Throws strata::Error(IO) naming the thread that could not start (after stopping the others).
  explicit ThreadPool(int n_threads = 0, int spin_us = kDefaultSpinMicros);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) over [0, n) in chunks of at least `grain` items (the last of a share may be
  // smaller), each item exactly once; min(threads, n / grain) threads own a share (at least one).
  // Blocks until done. Exceptions thrown by fn are rethrown on the calling thread (the first one wins;
  // a thread that has seen it claims nothing more).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Jobs handed to the workers so far (inline runs not counted): tests and benchmarks count
  // dispatches per token with it.
  uint64_t dispatches() const noexcept { return dispatches_.load(std::memory_order_relaxed); }
  // Times a worker or the caller went to sleep on a condition variable (spin budget exhausted).
  uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }

  // The process-wide default pool (default_threads() threads unless set_default_threads ran).
  static ThreadPool& global();
  static void set_default_threads(int n_threads);
  // Physical cores this process may run on (SMT siblings counted once; sysfs topology, the
  // affinity mask), else std::thread::hardware_concurrency(); at least 1.
  static int default_threads();

  // Test seam: starting worker `index` (1 .. n_threads - 1; the caller is thread 1, so worker i is
  // thread i + 1) fails as if the OS refused it; -1 turns it off.
  static void fail_thread_start_for_test(int index);

 private:
  void worker_loop(int self);
  void run_chunks(int self);
  // The next chunk of a share, from its front or its back; false once the share is empty.
  bool claim(int share, bool from_back, int64_t* begin, int64_t* end);
  void stop_workers();

  std::vector<std::thread> workers_;
  const int spin_us_;

  std::atomic<uint64_t> generation_{0};  // bumped once per job; workers watch it
  std::atomic<int> pending_{0};          // workers still inside the job in flight
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;  // guards only the sleeps below
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;

  // The job in flight (written before generation_ is bumped, read after it is seen).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t grain_ = 1;  // the smallest claim (run_chunks)
  // Thread t's share of the job: (next unclaimed item << 32) | end, both 32-bit (parallel_for runs
  // jobs of 2^32 items or more in slices). One cache line each: claims do not contend across shares.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  std::unique_ptr<Share[]> shares_;
  std::atomic<bool> abort_{false};  // a chunk threw: claim nothing more
  std::exception_ptr error_;
  std::mutex error_mutex_;
  std::mutex dispatch_mutex_;  // one job at a time

  std::atomic<uint64_t> dispatches_{0};
  std::atomic<uint64_t> sleeps_{0};
};

}  // namespace strata
