#pragma once
// Memory read bandwidth of this machine, measured the way a GEMV reads its weights: one streaming
// pass over a buffer far larger than the caches, split over threads. Benchmarks report kernel
// throughput as a fraction of it. Allocates (a benchmark helper, never on an inference path).
#include <cstddef>
#include <cstdint>

namespace strata::cpu {

struct ReadBandwidth {
  double gb_per_s;  // best pass, 1e9 bytes per second
  double checksum;  // sum of what was read (keeps the reads alive)
};

// bytes: buffer size (rounded down to 4 KiB, at least 1 MiB); threads >= 1; reps >= 1 passes.
ReadBandwidth measure_read_bandwidth(std::size_t bytes, int threads, int reps);

#if defined(STRATA_HAVE_AVX2_TU)
namespace avx2 {
uint64_t read_sum(const uint64_t* p, std::size_t n);  // sum of n words with 256-bit loads
}
#endif

}  // namespace strata::cpu
