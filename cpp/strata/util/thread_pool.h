#pragma once
// A persistent pool of worker threads for data-parallel kernels. parallel_for splits [0, n)
// into chunks claimed through an atomic counter; the calling thread works too. Dispatch does not
// allocate, so it is safe on the per-token path.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

class ThreadPool {
 public:
  // n_threads counts the caller: 1 means "run everything inline".
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) over [0, n) in chunks of at least `grain` items. Blocks until done.
  // Exceptions thrown by fn are rethrown on the calling thread (the first one wins).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide default pool (hardware_concurrency threads unless set_default_threads ran).
  static ThreadPool& global();
  static void set_default_threads(int n_threads);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;

  // The job in flight.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
  std::mutex error_mutex_;
  std::mutex dispatch_mutex_;  // one job at a time
};

}  // namespace strata
