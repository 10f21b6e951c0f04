#pragma once
// Thin helpers over ThreadPool::parallel_for for the forward pass. The callable is wrapped in a
// lambda holding one reference, so std::function stores it inline: dispatch never allocates.
// Never call these (or a threaded gemv) from inside another parallel region of the same pool.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "strata/util/thread_pool.h"

namespace strata::engine {

// f(begin, end) over [0, n) in chunks of at least grain.
template <class F>
void parallel_ranges(ThreadPool* pool, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (!pool || pool->size() == 1) {
    f(int64_t{0}, n);
    return;
  }
  auto ref = [&f](int64_t b, int64_t e) { f(b, e); };
  pool->parallel_for(n, grain, ref);
}

// f(slot, item) for every item in [0, n): items are claimed dynamically; slot < slots(pool) names
// scratch that no other concurrent call uses.
inline int parallel_slots_count(const ThreadPool* pool) { return pool ? pool->size() : 1; }

template <class F>
void parallel_items(ThreadPool* pool, int64_t n, F&& f) {
  if (n <= 0) return;
  const int64_t slots = std::min<int64_t>(parallel_slots_count(pool), n);
  std::atomic<int64_t> next{0};
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t slot = b; slot < e; ++slot)
      for (;;) {
        const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= n) break;
        f(static_cast<int>(slot), i);
      }
  };
  parallel_ranges(pool, slots, 1, body);
}

}  // namespace strata::engine
