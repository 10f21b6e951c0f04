#pragma once
// The loops every kernel over a repacked (16-row group) layout shares: walk the groups of a matrix,
// and split a call's activations into passes of at most MaxA (one pass per compile-time count, so a
// kernel's registers are sized by its template argument). Results do not depend on the split.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "strata/cpu/prefetch.h"
#include "strata/cpu/repack/layout.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::repack {

// fn(group bytes, first row, valid rows) for each 16-row group of an nrows-row matrix at w.
template <class Fn>
inline void for_each_group(const void* w, std::size_t stride, int64_t nrows, Fn&& fn) {
  const auto* p = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < nrows; r += kRows)
    fn(p + static_cast<std::size_t>(r) * stride, r, static_cast<int>(std::min<int64_t>(kRows, nrows - r)));
}

namespace detail {
template <int A, class Pass>
inline void rest_pass(int rest, int a, Pass& pass) {
  if constexpr (A > 0) {
    if (rest == A)
      pass.template operator()<A>(a);
    else
      rest_pass<A - 1>(rest, a, pass);
  }
}
}  // namespace detail

// pass.template operator()<A>(first) over activations [first, first + A): passes of MaxA, then one of
// the remainder.
template <int MaxA, class Pass>
inline void for_each_act_pass(int nact, Pass&& pass) {
  int a = 0;
  for (; nact - a >= MaxA; a += MaxA) pass.template operator()<MaxA>(a);
  detail::rest_pass<MaxA - 1>(nact - a, a, pass);
}

// The GEMV and several-activation entry points of a repacked super-block type T (Q8_K activations) whose
// group kernel is Group::run<A>(nb, group bytes, activations, outputs, first row, valid rows, prefetch):
// the group's weights prefetched pf bytes ahead (cpu/prefetch.h) by the first pass over them only, the
// later passes finding them in L1. Passes of at most MaxA activations (fewer where a kernel's accumulators
// for more would not fit the registers: AVX2 has 16).
template <quant::GGMLType T, class Group>
void k_rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* y = static_cast<const quant::BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  const std::size_t pf = gemv_prefetch_bytes(T);
  for_each_group(w, stride, nrows,
                 [&](const uint8_t* grp, int64_t r, int nv) { Group::template run<1>(nb, grp, &y, &out, r, nv, pf); });
}

template <quant::GGMLType T, class Group, int MaxA = 4>
void k_rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                  float* const* outs) {
  const auto* const* y = reinterpret_cast<const quant::BlockQ8_K* const*>(acts);
  const int64_t nb = n / quant::kQK_K;
  const std::size_t pf = gemv_prefetch_bytes(T);
  for_each_group(w, stride, nrows, [&](const uint8_t* grp, int64_t r, int nv) {
    for_each_act_pass<MaxA>(
        nact, [&]<int A>(int a) { Group::template run<A>(nb, grp, y + a, outs + a, r, nv, a == 0 ? pf : 0); });
  });
}

}  // namespace strata::cpu::repack
