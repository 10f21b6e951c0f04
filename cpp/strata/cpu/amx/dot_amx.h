#pragma once
// AMX-INT8 kernels of the repacked Q8_0 / Q4_0 weights (cpu/repack/layout.h). This folder is built
// with -mamx-tile -mamx-int8 and the AVX-512 flags: nothing here may run before cpu::amx_status()
// says usable (cpu/features.h), and nothing here may be included from a baseline translation unit
// except these declarations.
#include <cstddef>
#include <cstdint>

namespace strata::cpu::amx {

// 16 x 16 int8 tile products (TDPBSUD, TDPBSSD) against their values computed in plain integers, on
// this thread and two new ones, with sleeps between uses, then the tile kernels below against the
// scalar kernel; true when every one agrees. Each thread configures its tiles and releases them.
// The one-time probe of cpu::detect_amx (run in a child process there: a fault on any of its
// threads must not end the caller).
bool probe_tiles();

// From this many activations on, the multi-activation kernels of cpu::amx::kernel() run on tiles;
// below it they call the AVX-512 kernels (measured: bench/amx_bench.cpp, docs/benchmarks.md).
inline constexpr int kMinTileActs = 8;

// The tile kernels themselves, for every nact >= 1 (tests and bench/amx_bench.cpp call them
// directly; cpu::dot_kernel hands out the thresholded ones). Same contract as cpu::DotRowsMultiFn.
void dot_rows_multi_q8_0_r16_tiles(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                                   int nact, float* const* outs);
void dot_rows_multi_q4_0_r16_tiles(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                                   int nact, float* const* outs);

}  // namespace strata::cpu::amx
