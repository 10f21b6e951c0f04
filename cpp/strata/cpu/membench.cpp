#include "strata/cpu/membench.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/util/aligned.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::cpu {
namespace {

// Sum of 64-bit words with eight independent accumulators (one cache line per iteration); the
// compiler vectorises it, and integer adds keep it far below the cost of a memory fetch.
uint64_t sum_words_portable(const uint64_t* p, std::size_t n) {
  uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += p[i + static_cast<std::size_t>(k)];
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// The widest loads the kernels use here (AVX2 when it is the active ISA).
using SumFn = uint64_t (*)(const uint64_t*, std::size_t);
SumFn pick_sum() {
#if defined(STRATA_HAVE_AVX2_TU)
  if (isa_has_avx2(active_isa())) return avx2::read_sum;
#endif
  return sum_words_portable;
}

}  // namespace

ReadBandwidth measure_read_bandwidth(std::size_t bytes, int threads, int reps) {
  if (threads < 1 || reps < 1) throw_error(ErrorKind::Value, "measure_read_bandwidth: threads and reps must be >= 1");
  bytes = std::max<std::size_t>(bytes, std::size_t{1} << 20) & ~std::size_t{4095};
  const std::size_t words = bytes / 8;
  AlignedBuffer<uint64_t> buf(words);
  for (std::size_t i = 0; i < words; ++i) buf[i] = i;  // fault every page in before timing
  ThreadPool pool(threads);
  const int64_t lines = static_cast<int64_t>(words / 8);
  std::vector<uint64_t> partial(static_cast<std::size_t>(lines / 1024 + 1));
  const SumFn sum_words = pick_sum();
  double best = 0.0;
  uint64_t total = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    // 1024-line (64 KiB) pieces, each summed into its own slot.
    pool.parallel_for(lines / 1024 + 1, 16, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t l0 = c * 1024, l1 = std::min<int64_t>(lines, l0 + 1024);
        partial[static_cast<std::size_t>(c)] =
            l1 > l0 ? sum_words(buf.data() + 8 * l0, static_cast<std::size_t>(8 * (l1 - l0))) : 0;
      }
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (uint64_t v : partial) total += v;
    best = std::max(best, static_cast<double>(lines * 64) / s / 1e9);
  }
  return {best, static_cast<double>(total)};
}

}  // namespace strata::cpu
