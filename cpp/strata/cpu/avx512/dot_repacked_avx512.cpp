// AVX-512 VNNI kernels of the repacked Q8_0, Q4_0 and Q5_0 types (cpu/repack/layout.h): 16 rows per group, one
// 512-bit register per 4-column step whose lane r is row r, so each step is one vpdpbusd against
// the activation's 4 bytes broadcast. The weights are unsigned (Q8_0 + 128 as stored, Q4_0's nibbles,
// Q5_0's nibbles with their fifth bit) and the accumulator starts at −128·Σy (−8·Σy, −16·Σy), so the int32 lane is
// exactly the row's block sum; then sum += sumi · (dx·dy) with the multiply and the add rounded separately (this file
// is built with -ffp-contract=off), which is the scalar kernel's arithmetic: results are bitwise the scalar path's. A
// GEMV walks one row group at a time, so the weights stream as one sequential read (sharing each activation broadcast
// across four interleaved groups read 35 % slower from memory: bench/gemv_bench.py, docs/benchmarks.md); with several
// activations each group's unpacked weights are shared by up to four of them.
#include <algorithm>
#include <cstring>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/cpu/prefetch.h"
#include "strata/cpu/repack/act_terms.h"
#include "strata/cpu/repack/layout.h"
#include "strata/cpu/repack/row_groups.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx512 {
namespace {

static_assert(repack::kRows == 16, "store_rows (simd_avx512.h) stores 16-row groups");

using quant::BlockQ8_0;

struct Q8Ops {
  using L = repack::Q8Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q8_0_R16;
  static constexpr int kBias = 128;
  static constexpr int kHiShift = 0;
  static void steps(const uint8_t* qs, __m512i* st) {
    for (int k = 0; k < 8; ++k) st[k] = load512_in_order(qs + 64 * k);  // ascending lines (simd_avx512.h)
  }
};

// Q4_0_R16: the nibbles are the unsigned operand (q, value q − 8), so the accumulator starts at −8·Σy.
// The high nibbles go in unshifted (w & 0xF0 = 16·q): their chain (steps 4..7, its own accumulator)
// sums 16× the products, |sum| <= 16·15·127·16 fits int32 with no saturation in vpdpbusd, and one
// arithmetic shift right by kHiShift = 4 per block returns the exact sum: four shifts per block saved.
struct Q4Ops {
  using L = repack::Q4Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q4_0_R16;
  static constexpr int kBias = 8;
  static constexpr int kHiShift = 4;
  static void steps(const uint8_t* qs, __m512i* st) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), h4 = _mm512_set1_epi8(static_cast<char>(0xF0));
    for (int c = 0; c < 4; ++c) {
      const __m512i w = load512_once(qs + 64 * c);
      st[c] = _mm512_and_si512(w, m4);      // columns 4c .. 4c + 3
      st[c + 4] = _mm512_and_si512(w, h4);  // 16 × columns 16 + 4c .. 16 + 4c + 3
    }
  }
};

// Q5_0_R16: each step's nibbles (the high ones shifted down) plus 16 in the bytes whose fifth bit is set,
// one masked byte add from the step's 64-bit mask (layout.h): q in [0, 31], value q − 16, so the
// accumulator starts at −16·Σy. Both chains hold plain products (4·31·127 per lane and step).
struct Q5Ops {
  using L = repack::Q5Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q5_0_R16;
  static constexpr int kBias = 16;
  static constexpr int kHiShift = 0;
  static __mmask64 step_mask(const uint8_t* qs, int s) {
    uint64_t m;
    std::memcpy(&m, qs + repack::kQ5MaskOff + 8 * s, 8);
    return static_cast<__mmask64>(m);
  }
  static void steps(const uint8_t* qs, __m512i* st) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), h = _mm512_set1_epi8(0x10);
    for (int c = 0; c < 4; ++c) {
      const __m512i w = load512_once(qs + 64 * c);
      const __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
      st[c] = _mm512_mask_add_epi8(lo, step_mask(qs, c), lo, h);          // columns 4c .. 4c + 3
      st[c + 4] = _mm512_mask_add_epi8(hi, step_mask(qs, c + 4), hi, h);  // columns 16 + 4c .. 16 + 4c + 3
    }
  }
};

// Q5_1_R16: Q5_0_R16's steps with q used unsigned (x = d·q + m: no offset, the chains start at 0) and a min
// term per block, m·dy·Σy, added after the d term as the plain scalar kernel adds it. kBias = 1 only makes the
// call's activation terms hold −Σy (act_terms.h), which the min term negates.
struct Q51Ops : Q5Ops {
  using L = repack::Q51Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q5_1_R16;
  static constexpr int kBias = 1;
  static constexpr bool kMin = true;
};
template <typename Ops>
constexpr bool kHasMin = requires { Ops::kMin; };

// IQ4_NL_R16: Q4_0_R16's bytes; each step's nibbles (the high ones shifted down) looked up in the codebook
// + 128 (vpshufb, every 128-bit lane holds the 16 values), so u ∈ [1, 241] is vpdpbusd's unsigned operand and
// the accumulator starts at −128·Σy, as Q8_0_R16's. Both chains hold plain products (4·241·127 per lane and
// step).
struct IQ4NLOps {
  using L = repack::Q4Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::IQ4_NL_R16;
  static constexpr int kBias = 128;
  static constexpr int kHiShift = 0;
  static void steps(const uint8_t* qs, __m512i* st) {
    const __m512i table = _mm512_xor_si512(_mm512_broadcast_i32x4(loadu128(quant::kIQ4NLValues)),
                                           _mm512_set1_epi8(static_cast<char>(0x80)));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m512i w = load512_once(qs + 64 * c);
      st[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(w, m4));                            // columns 4c ..
      st[c + 4] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4));  // 16 + 4c ..
    }
  }
};

// A block's integer sums: the low chain (which holds the start value) plus the high chain scaled back.
template <typename Ops>
inline __m512i block_isum(__m512i lo, __m512i hi) {
  if constexpr (Ops::kHiShift != 0)
    return _mm512_add_epi32(lo, _mm512_srai_epi32(hi, Ops::kHiShift));
  else
    return _mm512_add_epi32(lo, hi);
}

// Σ of the 32 activation bytes of a block.
inline int block_sum(const BlockQ8_0& y) {
  const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), loadu256(y.qs));
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(r);
}

// The activation terms (−kBias·Σy, dy) formed once per call: cpu/repack/act_terms.h.
using ActTerms = repack::ActTerms<block_sum, fp16>;
using repack::kPrepBlocks;

// One group (16 rows from grp) against one activation: out[0 .. n_valid). With pf > 0 each block
// pair first prefetches the pair's bytes pf further on (cpu/prefetch.h: on some CPUs one core's
// stream of weights needs it to reach the memory's bandwidth).
// Prepared / Prefetch are the call's constants (t.start set, pf > 0) as template arguments: tested in
// the loop they cost ~10 % of the kernel's speed from L2 on Zen 4.
template <typename Ops, bool Prepared, bool Prefetch>
void group_one_act(int64_t nb, const uint8_t* grp, const ActTerms& t, float* out, int n_valid, std::size_t pf) {
  using L = typename Ops::L;
  const BlockQ8_0* y = t.y;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (Prefetch && (b & 1) == 0) prefetch_lines(grp + L::pair(b) + pf, 2 * L::kBlockBytes);
    __m512i st[8];
    Ops::steps(grp + L::qs_off(b, nb), st);
    // Two independent vpdpbusd chains (steps 0..3, 4..7): one chain of eight would wait on the
    // instruction's latency at every step. Integer sums: the order changes nothing. The activation's
    // 4 bytes of step k are broadcast inside the vpdpbusd (its memory operand, {1to16}).
    const int32_t start = Prepared ? t.start[b] : t.start_at(b);
    __m512i lo = _mm512_set1_epi32(kHasMin<Ops> ? 0 : start), hi = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      lo = dpbusd_bcast(lo, st[k], y[b].qs + 4 * k);
      hi = dpbusd_bcast(hi, st[k + 4], y[b].qs + 16 + 4 * k);
    }
    const __m512i isum = block_isum<Ops>(lo, hi);
    const float dy = Prepared ? t.dy[b] : t.dy_at(b);
    const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(loadu256(grp + L::d_off(b, nb))), _mm512_set1_ps(dy));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), s));
    if constexpr (kHasMin<Ops>) {
      const __m512 m =
          _mm512_mul_ps(_mm512_cvtph_ps(loadu256(grp + L::qs_off(b, nb) + repack::kQ51MinOff)), _mm512_set1_ps(dy));
      acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(static_cast<float>(-start)), m));
    }
  }
  store_rows(out, acc, n_valid);
}

// One group against A activations: outs[a][0 .. 16). Each activation keeps two vpdpbusd chains, as
// above (with one chain of eight, two activations ran no faster per activation than one). With pf > 0
// each block pair first prefetches the pair's bytes pf further on, as the one-activation kernel does.
template <typename Ops, int A>
void group_acts(int64_t nb, const uint8_t* grp, const ActTerms* t, float* const* outs, int64_t r0, int n_valid,
                std::size_t pf) {
  using L = typename Ops::L;
  __m512 acc[A];
  for (int a = 0; a < A; ++a) acc[a] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (pf != 0 && (b & 1) == 0) prefetch_lines(grp + L::pair(b) + pf, 2 * L::kBlockBytes);
    __m512i st[8];
    Ops::steps(grp + L::qs_off(b, nb), st);
    const __m512 dw = _mm512_cvtph_ps(loadu256(grp + L::d_off(b, nb)));
    __m512i lo[A], hi[A];
    int32_t start[A];  // −kBias·Σy; with a min, −Σy for the min term and chains from 0
    for (int a = 0; a < A; ++a) {
      start[a] = t[a].start_at(b);
      lo[a] = _mm512_set1_epi32(kHasMin<Ops> ? 0 : start[a]);
      hi[a] = _mm512_setzero_si512();
    }
    [[maybe_unused]] __m512 mw;  // the rows' mins
    if constexpr (kHasMin<Ops>) mw = _mm512_cvtph_ps(loadu256(grp + L::qs_off(b, nb) + repack::kQ51MinOff));
    for (int k = 0; k < 4; ++k)
      for (int a = 0; a < A; ++a) {
        lo[a] = dpbusd_bcast(lo[a], st[k], t[a].y[b].qs + 4 * k);
        hi[a] = dpbusd_bcast(hi[a], st[k + 4], t[a].y[b].qs + 16 + 4 * k);
      }
    for (int a = 0; a < A; ++a) {
      const __m512 dy = _mm512_set1_ps(t[a].dy_at(b));
      acc[a] = _mm512_add_ps(acc[a],
                             _mm512_mul_ps(_mm512_cvtepi32_ps(block_isum<Ops>(lo[a], hi[a])), _mm512_mul_ps(dw, dy)));
      if constexpr (kHasMin<Ops>)
        acc[a] =
            _mm512_add_ps(acc[a], _mm512_mul_ps(_mm512_set1_ps(static_cast<float>(-start[a])), _mm512_mul_ps(mw, dy)));
    }
  }
  for (int a = 0; a < A; ++a) store_rows(outs[a] + r0, acc[a], n_valid);
}

template <typename Ops>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const int64_t nb = n / quant::kQK32;
  const std::size_t pf = gemv_prefetch_bytes(Ops::kType);
  alignas(64) int32_t start[kPrepBlocks];
  alignas(64) float dy[kPrepBlocks];
  const ActTerms t = ActTerms::make(static_cast<const BlockQ8_0*>(act), nb, nrows, Ops::kBias, start, dy);
  auto walk = [&]<bool Prepared, bool Prefetch>() {
    repack::for_each_group(w, stride, nrows, [&](const uint8_t* grp, int64_t r, int nv) {
      group_one_act<Ops, Prepared, Prefetch>(nb, grp, t, out + r, nv, pf);
    });
  };
  if (t.start != nullptr)
    pf != 0 ? walk.template operator()<true, true>() : walk.template operator()<true, false>();
  else
    pf != 0 ? walk.template operator()<false, true>() : walk.template operator()<false, false>();
}

// Group-major: each group's weights are unpacked once for all activations of a chunk (the engine
// hands at most kPrepActs per call; more are taken kPrepActs at a time).
template <typename Ops>
void rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                float* const* outs) {
  const auto* const* y = reinterpret_cast<const BlockQ8_0* const*>(acts);
  const int64_t nb = n / quant::kQK32;
  // Only a group's first pass streams its weights from memory; later passes find them in L1.
  const std::size_t pf = gemv_prefetch_bytes(Ops::kType);
  ActTerms::for_each_chunk(y, nact, nb, nrows, Ops::kBias, [&](const ActTerms* t, int c0, int nc) {
    repack::for_each_group(w, stride, nrows, [&](const uint8_t* grp, int64_t r, int nv) {
      repack::for_each_act_pass<4>(
          nc, [&]<int A>(int a) { group_acts<Ops, A>(nb, grp, t + a, outs + c0 + a, r, nv, a == 0 ? pf : 0); });
    });
  });
}

}  // namespace

void dot_rows_q4_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q4Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q4_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q4Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q5_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q5Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q5_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q5Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q5_1_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q51Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q5_1_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q51Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq4_nl_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<IQ4NLOps>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq4_nl_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                               int nact, float* const* outs) {
  rows_multi<IQ4NLOps>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q8_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q8Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q8_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q8Ops>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx512
