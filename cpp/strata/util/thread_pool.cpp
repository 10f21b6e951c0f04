#include "strata/util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "strata/util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace strata {

namespace {

std::atomic<int> g_fail_start_at{-1};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins until done() or spin_us have passed; true when done() became true. Past the first
// kYieldAfterMicros the spinner also yields between rounds: on an oversubscribed machine the thread
// it waits for may be runnable but not running, and a pure spin would take its time slice.
constexpr int kYieldAfterMicros = 20;

template <class Done>
bool spin_until(Done done, int spin_us) {
  if (spin_us <= 0) return done();
  const auto start = std::chrono::steady_clock::now();
  const auto yield_from = start + std::chrono::microseconds(std::min(spin_us, kYieldAfterMicros));
  const auto deadline = start + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return done();
    if (now >= yield_from) std::this_thread::yield();
  }
}

int resolved(int n_threads) { return n_threads > 0 ? n_threads : ThreadPool::default_threads(); }

#if defined(__linux__)
// C stdio, not iostreams: on one Linux machine (a Python 3.12 next to a CUDA/PyTorch install) an
// ifstream's `>> int` crashed inside the extension's locale facets when the process made its first pool.
int read_int(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return -1;
  int v = -1;
  if (std::fscanf(f, "%d", &v) != 1) v = -1;
  std::fclose(f);
  return v;
}

// Distinct (package, core) pairs among the CPUs this process may run on; 0 when unreadable.
int linux_physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int core = read_int(dir + "core_id"), pkg = read_int(dir + "physical_package_id");
    if (core < 0 || pkg < 0) return 0;
    cores.emplace(pkg, core);
  }
  return static_cast<int>(cores.size());
}
#endif

}  // namespace

int ThreadPool::default_threads() {
  int n = 0;
#if defined(__linux__)
  n = linux_physical_cores();
#elif defined(__APPLE__)
  int v = 0;
  std::size_t len = sizeof(v);
  if (sysctlbyname("hw.physicalcpu", &v, &len, nullptr, 0) == 0) n = v;
#endif
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, n);
}

void ThreadPool::fail_thread_start_for_test(int index) { g_fail_start_at.store(index); }

ThreadPool::ThreadPool(int n_threads, int spin_us) : spin_us_(std::max(0, spin_us)) {
  n_threads = resolved(n_threads);
  shares_ = std::make_unique<Share[]>(static_cast<std::size_t>(n_threads));
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) {
    std::string why;
    try {
      if (i == g_fail_start_at.load())
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
      workers_.emplace_back([this, i] { worker_loop(i); });
    } catch (const std::exception& e) {  // std::system_error (EAGAIN), or bad_alloc for its state
      why = e.what();
    }
    if (!why.empty()) {
      // The started workers wait for a job: stop and join them before the pool unwinds.
      stop_workers();
      throw_error(ErrorKind::IO, "could not start worker thread " + std::to_string(i + 1) + " of " +
                                     std::to_string(n_threads) + " (" + why +
                                     "); lower the thread count (STRATA_THREADS / --threads) or raise the "
                                     "process's thread or memory limit");
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

namespace {
constexpr uint64_t kLow32 = 0xffffffffu;
}  // namespace

bool ThreadPool::claim(int share, bool from_back, int64_t* begin, int64_t* end) {
  // From the front (the owner): a quarter of what is left, rounded up, so chunks shrink toward the
  // share's end and leave its unclaimed tail to any thread that finishes early. From the back (the
  // others): a quarter rounded down. Never under the grain, never past what is left.
  std::atomic<uint64_t>& r = shares_[static_cast<std::size_t>(share)].range;
  uint64_t v = r.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t f = static_cast<int64_t>(v >> 32), b = static_cast<int64_t>(v & kLow32);
    if (f >= b) return false;
    const int64_t take = std::min(b - f, std::max(grain_, (b - f + (from_back ? 0 : 3)) / 4));
    const int64_t nf = from_back ? f : f + take, nb = from_back ? b - take : b;
    if (r.compare_exchange_weak(v, (static_cast<uint64_t>(nf) << 32) | static_cast<uint64_t>(nb),
                                std::memory_order_relaxed)) {
      *begin = from_back ? nb : f;
      *end = from_back ? b : nf;
      return true;
    }
  }
}

void ThreadPool::run_chunks(int self) {
  const int threads = size();
  auto run = [&](int64_t b, int64_t e) {
    try {
      (*fn_)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      abort_.store(true, std::memory_order_relaxed);  // stop handing out work
    }
  };
  int64_t b = 0, e = 0;
  // The own share front to back, then the others' from their backs (the nearest share first).
  while (!abort_.load(std::memory_order_relaxed) && claim(self, false, &b, &e)) run(b, e);
  for (int k = 1; k < threads; ++k) {
    const int other = (self + k) % threads;
    while (!abort_.load(std::memory_order_relaxed) && claim(other, true, &b, &e)) run(b, e);
  }
}

void ThreadPool::worker_loop(int self) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] { return stop_.load() || generation_.load() != seen; };
    if (!spin_until(ready, spin_us_)) {
      std::unique_lock<std::mutex> lock(mutex_);
      // Announce the sleep before the last look (seq_cst): a dispatcher that bumps generation_
      // after that look sees the count and notifies under the mutex, so no wake-up is lost.
      sleeping_workers_.fetch_add(1);
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      cv_start_.wait(lock, ready);
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    run_chunks(self);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int threads = size();
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // Shares hold 32-bit bounds: a larger job runs as consecutive jobs of at most 2^32 - 1 items.
  constexpr int64_t kMaxJob = static_cast<int64_t>(kLow32);
  if (n > kMaxJob) {
    for (int64_t off = 0; off < n; off += kMaxJob) {
      const int64_t len = std::min(kMaxJob, n - off);
      const std::function<void(int64_t, int64_t)> part = [&fn, off](int64_t b, int64_t e) { fn(off + b, off + e); };
      parallel_for(len, grain, part);
    }
    return;
  }
  std::lock_guard<std::mutex> dispatch(dispatch_mutex_);
  fn_ = &fn;
  grain_ = grain;
  // Shares of at least a grain: a job of a few grains gives the first k threads a share each, and the
  // others only take from their backs (in chunks of at least a grain too), as callers that pick a grain
  // to bound the threads a small job goes to expect.
  const int64_t k = std::clamp<int64_t>(n / grain, 1, threads);
  for (int t = 0; t < threads; ++t) {
    const auto b = static_cast<uint64_t>(t < k ? n * t / k : n), e = static_cast<uint64_t>(t < k ? n * (t + 1) / k : n);
    shares_[static_cast<std::size_t>(t)].range.store((b << 32) | e, std::memory_order_relaxed);
  }
  abort_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()));
  generation_.fetch_add(1);  // publishes the job (seq_cst)
  dispatches_.fetch_add(1, std::memory_order_relaxed);
  if (sleeping_workers_.load() > 0) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
    }
    cv_start_.notify_all();
  }
  run_chunks(0);
  auto done = [&] { return pending_.load() == 0; };
  if (!spin_until(done, spin_us_)) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_sleeping_.store(true);
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    cv_done_.wait(lock, done);
    caller_sleeping_.store(false);
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

namespace {
std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;
// Pools replaced by set_default_threads stay alive: engines created before keep a pointer to theirs.
std::vector<std::unique_ptr<ThreadPool>> g_retired;
int g_default_threads = 0;
}  // namespace

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(g_default_threads);
  return *g_pool;
}

void ThreadPool::set_default_threads(int n_threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_default_threads = n_threads;
  if (g_pool && g_pool->size() != resolved(n_threads)) g_retired.push_back(std::move(g_pool));
}

}  // namespace strata
