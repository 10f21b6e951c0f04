// Reference kernels of the repacked types (cpu/repack/layout.h): the plain scalar kernels'
// arithmetic, block by block, read from the interleaved layout, so a repacked row's dot is bitwise
// the plain Q4_0 / Q5_0 / Q5_1 / Q8_0 / Q2_K / Q3_K / Q4_K / Q6_K / IQ4_XS / IQ4_NL scalar
// dot. Every SIMD repacked kernel is tested against these.
#include <algorithm>
#include <cstring>

#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/layout.h"
#include "strata/quant/blocks.h"
#include "strata/quant/quantize.h"
#include "strata/util/fp16.h"

namespace strata::cpu::scalar {
namespace {

using quant::BlockQ8_0;
using quant::GGMLType;

// Row r's value of the 16 rows' fp16 values stored side by side at p (a group's d, dmin, ...).
inline float row_fp16(const uint8_t* p, int r) {
  uint16_t h;
  std::memcpy(&h, p + 2 * static_cast<std::size_t>(r), 2);
  return fp16_to_fp32(h);
}

struct Q8 {
  using L = repack::Q8Layout;
  static int sum(const uint8_t* qs, int r, const BlockQ8_0& y) {
    int sumi = 0;
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 4; ++j) sumi += static_cast<int8_t>(qs[64 * k + 4 * r + j] ^ 0x80u) * y.qs[4 * k + j];
    return sumi;
  }
};

// Q4_0_R16 / IQ4_NL_R16 (Q4_0_R16's bytes): the value of each nibble is Value::of(nibble).
template <class Value>
struct Nibbles {
  using L = repack::Q4Layout;
  static int sum(const uint8_t* qs, int r, const BlockQ8_0& y) {
    int sumi = 0;
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 4; ++j) {
        const int q = qs[64 * c + 4 * r + j];
        sumi += Value::of(q & 0xF) * y.qs[4 * c + j] + Value::of(q >> 4) * y.qs[16 + 4 * c + j];
      }
    return sumi;
  }
};
struct Q4Value {
  static int of(int q) { return q - 8; }
};
struct IQ4NLValue {  // the index of its codebook value
  static int of(int q) { return quant::kIQ4NLValues[q]; }
};
using Q4 = Nibbles<Q4Value>;
using IQ4NL = Nibbles<IQ4NLValue>;

// Q5_0_R16 / Q5_1_R16: Q4's nibbles with the fifth bits of the steps' masks (layout.h), minus kOffset.
template <class Layout, int kOffset>
struct Q5Bits {
  using L = Layout;
  static int q5(int nibble, const uint8_t* hm, int s, int r, int j) {
    return (nibble | (repack::q5_fifth_bit(hm, s, r, j) << 4)) - kOffset;
  }
  static int sum(const uint8_t* qs, int r, const BlockQ8_0& y) {
    const uint8_t* hm = qs + repack::kQ5MaskOff;
    int sumi = 0;
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 4; ++j) {
        const int q = qs[64 * c + 4 * r + j];
        sumi += q5(q & 0xF, hm, c, r, j) * y.qs[4 * c + j] + q5(q >> 4, hm, c + 4, r, j) * y.qs[16 + 4 * c + j];
      }
    return sumi;
  }
};
using Q5 = Q5Bits<repack::Q5Layout, 16>;
// Q5_1_R16: q used unsigned (x = d·q + m), the rows' mins after the masks; its min term m·dy·Σy is added
// per block after the d term, as the plain kernel adds it.
struct Q51 : Q5Bits<repack::Q51Layout, 0> {
  static constexpr bool kMin = true;
};

template <typename F>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  using L = typename F::L;
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / quant::kQK32;
  for (int64_t g = 0; g * repack::kRows < nrows; ++g) {
    const uint8_t* grp = p + static_cast<std::size_t>(g) * repack::kRows * stride;
    const int64_t n_in = std::min<int64_t>(repack::kRows, nrows - g * repack::kRows);
    for (int r = 0; r < n_in; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const float dy = fp16_to_fp32(y[b].d);
        sum += static_cast<float>(F::sum(grp + L::qs_off(b, nb), r, y[b])) * (row_fp16(grp + L::d_off(b, nb), r) * dy);
        if constexpr (requires { F::kMin; }) {
          int sumy = 0;
          for (int j = 0; j < quant::kQK32; ++j) sumy += y[b].qs[j];
          sum += static_cast<float>(sumy) * (row_fp16(grp + L::qs_off(b, nb) + repack::kQ51MinOff, r) * dy);
        }
      }
      out[g * repack::kRows + r] = sum;
    }
  }
}

void act_q8_0(const float* x, void* a, int64_t n) { quant::quantize_row_q8_0(x, static_cast<BlockQ8_0*>(a), n); }
void act_q8_k(const float* x, void* a, int64_t n) { quant::quantize_row_q8_k(x, static_cast<quant::BlockQ8_K*>(a), n); }

// The rows of a repacked super-block type (Q8_K activations), block by block: F::block is one block's term
// of a row's sum, the plain scalar kernel's per-block arithmetic read from the layout. F::block is always
// inlined, so `sum += term` is the plain kernel's expression: where the compiler contracts a multiply and an
// add (AArch64's default), it contracts both kernels alike and they stay bitwise equal.
template <class F>
void rows_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const quant::BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t g0 = 0; g0 < nrows; g0 += repack::kRows) {
    const uint8_t* grp = p + static_cast<std::size_t>(g0) * stride;
    const int n_in = static_cast<int>(std::min<int64_t>(repack::kRows, nrows - g0));
    for (int r = 0; r < n_in; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) sum += F::block(grp, r, b, nb, y[b]);
      out[g0 + r] = sum;
    }
  }
}

// Q4_K_R16 / Q5_K_R16 (L, Q5): dot_q4_k of dot_scalar.cpp / dot_q5_k of dot_q3_k_q5_k_scalar.cpp
// (integer sub-block sums times the 6-bit scales, the mins against the activation's pair sums, then
// sum += d·isum − dmin·summs; Q5_K's fifth bit from the interleaved qh), read from the layout.
template <class L, bool Q5>
struct Q45K {
  [[gnu::always_inline]] static float block(const uint8_t* grp, int r, int64_t b, int64_t /*nb*/,
                                            const quant::BlockQ8_K& yb) {
    uint8_t usc[128], umin[128];
    const uint8_t* blk = grp + L::block(b);
    repack::unpack6(blk + L::kScales, usc);
    repack::unpack6(blk + L::kMins, umin);
    int isum = 0, summs = 0;
    for (int g = 0; g < 8; ++g) {
      const int shift = 4 * (g % 2);
      int part = 0;
      for (int l = 0; l < 32; ++l) {
        const int i = 32 * (g / 2) + l;  // byte of the plain row's qs
        int q = (blk[L::kQs + 64 * (i / 4) + 4 * r + i % 4] >> shift) & 0xF;
        if constexpr (Q5) q |= ((blk[L::kQh + 64 * (l / 4) + 4 * r + l % 4] >> g) & 1) << 4;  // qh[l]
        part += q * yb.qs[32 * g + l];
      }
      isum += usc[16 * g + r] * part;
      summs += umin[32 * (g / 2) + 2 * r + g % 2] * (yb.bsums[2 * g] + yb.bsums[2 * g + 1]);
    }
    const float d = yb.d * row_fp16(blk + L::kD, r);
    const float dmin = yb.d * row_fp16(blk + L::kDmin, r);
    return d * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
};

// Q6_K_R16: dot_q6_k of dot_scalar.cpp (per 16-column sub-block the exact sum of (q − 32)·y, times
// its int8 scale, then sum += (dy·dx)·isum), read from the layout.
struct Q6K {
  [[gnu::always_inline]] static float block(const uint8_t* grp, int r, int64_t b, int64_t nb,
                                            const quant::BlockQ8_K& yb) {
    using L = repack::Q6KLayout;
    const uint8_t* qs = grp + L::qs_off(b, nb);
    const uint8_t* meta = grp + L::meta_off(b, nb);
    // Plain byte i of the row's ql / qh, read through the interleave.
    auto ql = [&](int i) { return static_cast<int>(qs[64 * L::ql_chunk(i / 4) + 4 * r + i % 4]); };
    auto qh = [&](int i) { return static_cast<int>(qs[64 * L::qh_chunk(i / 4) + 4 * r + i % 4]); };
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const int8_t* q8 = yb.qs + 128 * h;
      int part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16, a = ql(64 * h + l), c = ql(64 * h + l + 32), e = qh(32 * h + l);
        part[is + 0] += (((a & 0xF) | (((e >> 0) & 3) << 4)) - 32) * q8[l];
        part[is + 2] += (((c & 0xF) | (((e >> 2) & 3) << 4)) - 32) * q8[l + 32];
        part[is + 4] += (((a >> 4) | (((e >> 4) & 3) << 4)) - 32) * q8[l + 64];
        part[is + 6] += (((c >> 4) | (((e >> 6) & 3) << 4)) - 32) * q8[l + 96];
      }
      for (int g = 0; g < 8; ++g) {
        const int sg = 8 * h + g;
        isum += static_cast<int8_t>(meta[L::kScales + 32 * (sg / 2) + 2 * r + sg % 2]) * part[g];
      }
    }
    return (yb.d * row_fp16(meta, r)) * static_cast<float>(isum);
  }
};

// Q2_K_R16: dot_q2_k of dot_scalar.cpp (per 16-column sub-block the exact sum of q·y times its 4-bit
// scale, the mins' Σ m·bsum, then sum += (dy·dx)·isum − (dy·dmin)·summs), read from the layout.
struct Q2K {
  [[gnu::always_inline]] static float block(const uint8_t* grp, int r, int64_t b, int64_t /*nb*/,
                                            const quant::BlockQ8_K& yb) {
    using L = repack::Q2KLayout;
    const uint8_t* blk = grp + L::block(b);
    auto sc = [&](int g) { return static_cast<int>(blk[L::kScales + 32 * (g / 2) + 2 * r + g % 2]); };
    int summs = 0;
    for (int g = 0; g < 16; ++g) summs += yb.bsums[g] * (sc(g) >> 4);
    int isum = 0;
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int half = 0; half < 2; ++half) {
          int part = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int q = blk[L::kQs + 64 * (8 * h + l / 4) + 4 * r + l % 4];
            part += ((q >> (2 * s)) & 3) * yb.qs[128 * h + 32 * s + l];
          }
          isum += (sc(8 * h + 2 * s + half) & 0xF) * part;
        }
    const float dall = yb.d * row_fp16(blk + L::kD, r);
    const float dmin = yb.d * row_fp16(blk + L::kDmin, r);
    return dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
};

// Q3_K_R16: dot_q3_k of dot_q3_k_q5_k_scalar.cpp (per 16-column sub-block the exact sum of q3·y, q3 in
// −4..3, times its scale, then sum += (dx·dy)·isum), read from the layout.
struct Q3K {
  [[gnu::always_inline]] static float block(const uint8_t* grp, int r, int64_t b, int64_t nb,
                                            const quant::BlockQ8_K& yb) {
    using L = repack::Q3KLayout;
    uint8_t u[256];
    const uint8_t* qs = grp + L::qs_off(b, nb);
    const uint8_t* meta = grp + L::meta_off(b, nb);
    repack::unpack6(meta + L::kScales, u);
    repack::unpack6(meta + L::kScales + 96, u + 128);
    int isum = 0;
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int half = 0; half < 2; ++half) {
          int part = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int q = qs[64 * L::qs_chunk(h, l / 4) + 4 * r + l % 4];
            const int m = qs[64 * L::hm_chunk(l / 4) + 4 * r + l % 4];
            part += (((q >> (2 * s)) & 3) - (((m >> (4 * h + s)) & 1) ? 0 : 4)) * yb.qs[128 * h + 32 * s + l];
          }
          isum += (u[16 * (8 * h + 2 * s + half) + r] - 32) * part;
        }
    return (row_fp16(meta, r) * yb.d) * static_cast<float>(isum);
  }
};

// IQ4_XS_R16: dot_iq4_xs of dot_scalar.cpp (per 32-column sub-block the exact sum of codebook value
// times y, times the scale ls − 32, then sum += (dy·dx)·isum), read from the layout.
struct IQ4XS {
  [[gnu::always_inline]] static float block(const uint8_t* grp, int r, int64_t b, int64_t /*nb*/,
                                            const quant::BlockQ8_K& yb) {
    using L = repack::IQ4XSLayout;
    uint8_t u[128];
    const uint8_t* blk = grp + L::block(b);
    repack::unpack6(blk + L::kScales, u);
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      const int8_t* q8 = yb.qs + 32 * g;
      int part = 0;
      for (int l = 0; l < 16; ++l) {
        const int i = 16 * g + l;  // byte of the plain row's qs
        const int q = blk[L::kQs + 64 * (i / 4) + 4 * r + i % 4];
        part += quant::kIQ4NLValues[q & 0xF] * q8[l] + quant::kIQ4NLValues[q >> 4] * q8[l + 16];
      }
      isum += (u[16 * g + r] - 32) * part;
    }
    return (yb.d * row_fp16(blk + L::kD, r)) * static_cast<float>(isum);
  }
};

constexpr DotKernel kQ4_0_R16{GGMLType::Q8_0, act_q8_0, rows<Q4>, nullptr, repack::kRows};
constexpr DotKernel kQ5_0_R16{GGMLType::Q8_0, act_q8_0, rows<Q5>, nullptr, repack::kRows};
constexpr DotKernel kIQ4_NL_R16{GGMLType::Q8_0, act_q8_0, rows<IQ4NL>, nullptr, repack::kRows};
constexpr DotKernel kQ5_1_R16{GGMLType::Q8_0, act_q8_0, rows<Q51>, nullptr, repack::kRows};
constexpr DotKernel kQ8_0_R16{GGMLType::Q8_0, act_q8_0, rows<Q8>, nullptr, repack::kRows};
constexpr DotKernel kQ4_K_R16{GGMLType::Q8_K, act_q8_k, rows_k<Q45K<repack::Q4KLayout, false>>, nullptr, repack::kRows};
constexpr DotKernel kQ5_K_R16{GGMLType::Q8_K, act_q8_k, rows_k<Q45K<repack::Q5KLayout, true>>, nullptr, repack::kRows};
constexpr DotKernel kQ6_K_R16{GGMLType::Q8_K, act_q8_k, rows_k<Q6K>, nullptr, repack::kRows};
constexpr DotKernel kQ3_K_R16{GGMLType::Q8_K, act_q8_k, rows_k<Q3K>, nullptr, repack::kRows};
constexpr DotKernel kQ2_K_R16{GGMLType::Q8_K, act_q8_k, rows_k<Q2K>, nullptr, repack::kRows};
constexpr DotKernel kIQ4_XS_R16{GGMLType::Q8_K, act_q8_k, rows_k<IQ4XS>, nullptr, repack::kRows};

}  // namespace

const DotKernel* repacked_kernel(GGMLType type) {
  switch (type) {
    case GGMLType::Q4_0_R16: return &kQ4_0_R16;
    case GGMLType::Q5_0_R16: return &kQ5_0_R16;
    case GGMLType::IQ4_NL_R16: return &kIQ4_NL_R16;
    case GGMLType::Q5_1_R16: return &kQ5_1_R16;
    case GGMLType::Q8_0_R16: return &kQ8_0_R16;
    case GGMLType::Q4_K_R16: return &kQ4_K_R16;
    case GGMLType::Q5_K_R16: return &kQ5_K_R16;
    case GGMLType::Q6_K_R16: return &kQ6_K_R16;
    case GGMLType::Q3_K_R16: return &kQ3_K_R16;
    case GGMLType::Q2_K_R16: return &kQ2_K_R16;
    case GGMLType::IQ4_XS_R16: return &kIQ4_XS_R16;
    default: return nullptr;
  }
}

}  // namespace strata::cpu::scalar
