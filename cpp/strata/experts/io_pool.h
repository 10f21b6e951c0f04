#pragma once
// A few threads that run read jobs for the expert store while the compute threads work. Jobs are
// small integers in a ring allocated up front (the store never has more jobs in flight than
// slots × parts), so submitting does not allocate. With 0 threads, submit() runs the job inline
// (reads on the compute thread, no overlap: the baseline the prefetch is measured against).
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::experts {

class IoPool {
 public:
  using Run = std::function<void(uint32_t job)>;  // must not throw
  IoPool(int n_threads, std::size_t max_jobs, Run run);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()); }
  // Queues a job (or runs it inline without threads). At most max_jobs may be queued at once.
  void submit(uint32_t job);

 private:
  void loop();

  Run run_;
  std::vector<uint32_t> ring_;
  std::size_t head_ = 0, count_ = 0;
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
};

}  // namespace strata::experts
