#pragma once
// The row and activation loops of the plain float kernels (F32 / F16 / BF16 weights, f32
// activations), shared by every ISA's file: weight rows in groups of RMax, each group against the
// activations in groups of AMax, the remainders with smaller tiles. Tile<R, A>::run(n, w, stride,
// x, outs, r) writes outs[0..A)[r..r+R) from one pass over the R rows starting at w (row r): every
// weight vector is loaded (and widened) once for all A activations, and the R·A accumulator chains
// are independent, which hides the FMA latency. A tile keeps each (row, activation)'s operations
// and their order, so results never depend on the grouping. Plain C++, no intrinsics: each ISA's
// file instantiates it with its own tiles, under its own compile flags.
#include <cstddef>
#include <cstdint>

// Before a tile's loops over its rows and activations: unrolled, so that the accumulator arrays
// become registers.
#if defined(__clang__)
#define STRATA_TILE_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define STRATA_TILE_UNROLL _Pragma("GCC unroll 16")
#else
#define STRATA_TILE_UNROLL
#endif

namespace strata::cpu {
namespace float_tiles_detail {

// Tile<R, A> for the rest < AMax activations left after the full groups (A = rest).
template <template <int, int> class Tile, int R, int A>
void acts_rest(int rest, int64_t n, const uint8_t* w, std::size_t stride, const float* const* x, float* const* outs,
               int64_t r) {
  if constexpr (A > 1) {
    if (rest < A) {
      acts_rest<Tile, R, A - 1>(rest, n, w, stride, x, outs, r);
      return;
    }
  }
  Tile<R, A>::run(n, w, stride, x, outs, r);
}

// R rows starting at w (row r) against all nact activations.
template <template <int, int> class Tile, int R, int AMax>
void row_group(int64_t n, const uint8_t* w, std::size_t stride, const float* const* x, int nact, float* const* outs,
               int64_t r) {
  int a = 0;
  for (; nact - a >= AMax; a += AMax) Tile<R, AMax>::run(n, w, stride, x + a, outs + a, r);
  if constexpr (AMax > 1) {
    if (nact > a) acts_rest<Tile, R, AMax - 1>(nact - a, n, w, stride, x + a, outs + a, r);
  }
}

// The rest < RMax rows after the full groups (R = rest).
template <template <int, int> class Tile, int R, int AMax>
void rows_rest(int rest, int64_t n, const uint8_t* w, std::size_t stride, const float* const* x, int nact,
               float* const* outs, int64_t r) {
  if constexpr (R > 1) {
    if (rest < R) {
      rows_rest<Tile, R - 1, AMax>(rest, n, w, stride, x, nact, outs, r);
      return;
    }
  }
  row_group<Tile, R, AMax>(n, w, stride, x, nact, outs, r);
}

}  // namespace float_tiles_detail

// outs[a][r] = dot(row r of w, x[a]) for r < nrows, a < nact. The row group is the outer loop: its
// R rows stay in L1 while every activation group passes over them.
template <template <int, int> class Tile, int RMax, int AMax>
void float_rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const float* const* x, int nact,
                float* const* outs) {
  static_assert(RMax >= 1 && AMax >= 1);
  const auto* p = static_cast<const uint8_t*>(w);
  int64_t r = 0;
  for (; nrows - r >= RMax; r += RMax)
    float_tiles_detail::row_group<Tile, RMax, AMax>(n, p + static_cast<std::size_t>(r) * stride, stride, x, nact, outs,
                                                    r);
  if constexpr (RMax > 1) {
    if (nrows > r)
      float_tiles_detail::rows_rest<Tile, RMax - 1, AMax>(
          static_cast<int>(nrows - r), n, p + static_cast<std::size_t>(r) * stride, stride, x, nact, outs, r);
  }
}

}  // namespace strata::cpu
