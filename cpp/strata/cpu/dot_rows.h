#pragma once
// The row loops that every ISA's super-block kernels share (plain C++, no intrinsics: each ISA's
// file instantiates them with its own block dots, under its own compile flags).
#include <cstddef>
#include <cstdint>

#include "strata/quant/blocks.h"

namespace strata::cpu {

// out[r] = Dot(row r, act) for the formats with Q8_K activations (256-value super-blocks).
template <typename Block, float (*Dot)(int64_t, const Block*, const quant::BlockQ8_K*)>
void rows_q8_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const quant::BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = Dot(nb, reinterpret_cast<const Block*>(p + static_cast<std::size_t>(r) * stride), y);
}

// outs[a][r] for a < nact: each row against the activations in groups of MaxA, then of 4, then the
// rest. RowActs<A>::run(nb, row, acts, outs, r) writes outs[0..A)[r] from one pass over the row.
template <typename Block, template <int> class RowActs, int MaxA>
void rows_multi_q8_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                     float* const* outs) {
  static_assert(MaxA == 4 || MaxA == 8);
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* const* y = reinterpret_cast<const quant::BlockQ8_K* const*>(acts);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t r = 0; r < nrows; ++r) {
    const auto* x = reinterpret_cast<const Block*>(p + static_cast<std::size_t>(r) * stride);
    int a = 0;
    for (; nact - a >= MaxA; a += MaxA) RowActs<MaxA>::run(nb, x, y + a, outs + a, r);
    for (; nact - a >= 4; a += 4) RowActs<4>::run(nb, x, y + a, outs + a, r);
    switch (nact - a) {
      case 3: RowActs<3>::run(nb, x, y + a, outs + a, r); break;
      case 2: RowActs<2>::run(nb, x, y + a, outs + a, r); break;
      case 1: RowActs<1>::run(nb, x, y + a, outs + a, r); break;
      default: break;
    }
  }
}

}  // namespace strata::cpu
