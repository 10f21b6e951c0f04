#include "strata/util/thread_pool.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace strata {

namespace {
int resolved(int n_threads) {  // 0 or less: one thread per core
  return n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  n_threads = resolved(n_threads);
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) break;
    const int64_t end = std::min(n_, begin + chunk_);
    try {
      (*fn_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      next_.store(n_, std::memory_order_relaxed);  // stop handing out work
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) cv_done_.notify_one();
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
  std::lock_guard<std::mutex> dispatch(dispatch_mutex_);
  // About four chunks per thread balances uneven rows without much counter traffic.
  const int64_t chunk = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  run_chunks();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_done_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
  }
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
