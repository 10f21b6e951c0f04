#pragma once
// The activation-side terms of a Q8_0 activation block that a kernel over repacked Q8_0 / Q4_0 / Q5_0 weights
// repeats for every 16-row group: the accumulator's start −bias·Σy (the weights are stored unsigned,
// biased by `bias`) and the block scale dy as a float. A call over several groups forms them once per
// activation (a 384-row matrix has 24 groups) when its rows are at most kPrepBlocks blocks long; longer
// rows, and calls over one group, form them per group. Integer sums and the same fp16 conversion: the
// results are the same bits either way. Sum / Fp16 are the ISA's exact block sum and fp16 -> f32.
#include <cstdint>

#include "strata/cpu/repack/layout.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::repack {

inline constexpr int64_t kPrepBlocks = 256;  // 8192 columns; the buffers live on the stack
inline constexpr int kPrepActs = 16;         // activations prepared per pass (the engine hands <= 16)

template <int (*Sum)(const quant::BlockQ8_0&), float (*Fp16)(uint16_t)>
struct ActTerms {
  const quant::BlockQ8_0* y = nullptr;
  const int32_t* start = nullptr;  // nullptr: formed per use
  const float* dy = nullptr;
  int bias = 0;  // 0: the kernel needs no Σy (start is 0)

  int32_t start_at(int64_t b) const { return start ? start[b] : bias == 0 ? 0 : -bias * Sum(y[b]); }
  float dy_at(int64_t b) const { return dy ? dy[b] : Fp16(y[b].d); }

  // The terms of one activation of an nb-block, nrows-row call; start / dy: kPrepBlocks each.
  static ActTerms make(const quant::BlockQ8_0* y, int64_t nb, int64_t nrows, int bias, int32_t* start, float* dy) {
    ActTerms t;
    t.y = y;
    t.bias = bias;
    if (nb > kPrepBlocks || nrows <= kRows) return t;
    for (int64_t b = 0; b < nb; ++b) {
      start[b] = bias == 0 ? 0 : -bias * Sum(y[b]);
      dy[b] = Fp16(y[b].d);
    }
    t.start = start;
    t.dy = dy;
    return t;
  }

  // fn(terms, first, count) over a call's nact activations y[0 .. nact) in chunks of kPrepActs, each
  // chunk's terms formed once (their buffers on this frame's stack) for every row group fn walks.
  template <class Fn>
  static void for_each_chunk(const quant::BlockQ8_0* const* y, int nact, int64_t nb, int64_t nrows, int bias, Fn&& fn) {
    alignas(64) int32_t start[kPrepActs][kPrepBlocks];
    alignas(64) float dy[kPrepActs][kPrepBlocks];
    ActTerms t[kPrepActs];
    for (int c0 = 0; c0 < nact; c0 += kPrepActs) {
      const int nc = nact - c0 < kPrepActs ? nact - c0 : kPrepActs;
      for (int a = 0; a < nc; ++a) t[a] = make(y[c0 + a], nb, nrows, bias, start[a], dy[a]);
      fn(static_cast<const ActTerms*>(t), c0, nc);
    }
  }
};

}  // namespace strata::cpu::repack
