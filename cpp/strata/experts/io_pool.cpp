#include "strata/experts/io_pool.h"

#include "strata/util/error.h"

namespace strata::experts {

IoPool::IoPool(int n_threads, std::size_t max_jobs, Run run)
    : run_(std::move(run)), ring_(max_jobs > 0 ? max_jobs : 1) {
  workers_.reserve(static_cast<std::size_t>(n_threads > 0 ? n_threads : 0));
  for (int i = 0; i < n_threads; ++i) workers_.emplace_back([this] { loop(); });
}

IoPool::~IoPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void IoPool::submit(uint32_t job) {
  if (workers_.empty()) {
    run_(job);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == ring_.size()) throw_error(ErrorKind::Internal, "expert I/O queue overflow");
    ring_[(head_ + count_) % ring_.size()] = job;
    ++count_;
  }
  cv_.notify_one();
}

void IoPool::loop() {
  for (;;) {
    uint32_t job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || count_ > 0; });
      if (count_ == 0) return;  // stopping with nothing left
      job = ring_[head_];
      head_ = (head_ + 1) % ring_.size();
      --count_;
    }
    run_(job);
  }
}

}  // namespace strata::experts
