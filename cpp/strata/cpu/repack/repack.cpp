#include "strata/cpu/repack/repack.h"

#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "strata/cpu/repack/layout.h"
#include "strata/util/aligned.h"
#include "strata/util/error.h"

namespace strata::cpu {
namespace {

using quant::GGMLType;

thread_local AlignedBuffer<uint8_t> t_scratch;

// Each type with a repacked form, and that form (quant/types.h).
constexpr std::pair<GGMLType, GGMLType> kRepackedForms[] = {
    {GGMLType::Q4_0, GGMLType::Q4_0_R16},     {GGMLType::Q5_0, GGMLType::Q5_0_R16},
    {GGMLType::Q8_0, GGMLType::Q8_0_R16},     {GGMLType::Q2_K, GGMLType::Q2_K_R16},
    {GGMLType::Q3_K, GGMLType::Q3_K_R16},     {GGMLType::Q4_K, GGMLType::Q4_K_R16},
    {GGMLType::Q5_K, GGMLType::Q5_K_R16},     {GGMLType::Q6_K, GGMLType::Q6_K_R16},
    {GGMLType::IQ4_XS, GGMLType::IQ4_XS_R16}, {GGMLType::IQ4_NL, GGMLType::IQ4_NL_R16},
    {GGMLType::Q5_1, GGMLType::Q5_1_R16},
};

void repack_q8_0(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  using L = repack::Q8Layout;
  for (int64_t b = 0; b < nb; ++b) {
    auto* d = reinterpret_cast<uint16_t*>(dst + L::d_off(b, nb));
    uint8_t* qs = dst + L::qs_off(b, nb);
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      d[r] = x->d;
      for (int k = 0; k < 8; ++k) {  // 4 quants at a time, each + 128 (sign bit flipped)
        uint32_t v;
        std::memcpy(&v, &x->qs[4 * k], 4);
        v ^= 0x80808080u;
        std::memcpy(&qs[64 * k + 4 * r], &v, 4);
      }
    }
  }
}

void repack_q4_0(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  using L = repack::Q4Layout;
  for (int64_t b = 0; b < nb; ++b) {
    auto* d = reinterpret_cast<uint16_t*>(dst + L::d_off(b, nb));
    uint8_t* qs = dst + L::qs_off(b, nb);
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const quant::BlockQ4_0*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      d[r] = x->d;
      for (int c = 0; c < 4; ++c) std::memcpy(&qs[64 * c + 4 * r], &x->qs[4 * c], 4);
    }
  }
}

// Q5_0 / Q5_1: the qs bytes as Q4_0's, the rows' qh bits regrouped into one 64-bit mask per 4-column step
// (layout.h); Q5_1's mins after the masks.
template <class Block, class L>
void repack_q5(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  constexpr bool kMin = std::is_same_v<Block, quant::BlockQ5_1>;
  for (int64_t b = 0; b < nb; ++b) {
    auto* d = reinterpret_cast<uint16_t*>(dst + L::d_off(b, nb));
    uint8_t* qs = dst + L::qs_off(b, nb);
    uint8_t* hm = qs + repack::kQ5MaskOff;
    std::memset(hm, 0, 8 * sizeof(uint64_t));
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const Block*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      d[r] = x->d;
      if constexpr (kMin) std::memcpy(qs + repack::kQ51MinOff + 2 * static_cast<std::size_t>(r), &x->m, 2);
      for (int c = 0; c < 4; ++c) std::memcpy(&qs[64 * c + 4 * r], &x->qs[4 * c], 4);
      uint32_t qh;
      std::memcpy(&qh, x->qh, 4);
      for (int s = 0; s < 8; ++s)
        for (int j = 0; j < 4; ++j) repack::q5_set_fifth_bit(hm, s, r, j, qh >> (4 * s + j));
    }
  }
}

// The inverse for one row r of a group.
template <class Block, class L>
void unpack_q5_row(const uint8_t* grp, int r, int64_t nb, Block* x) {
  for (int64_t b = 0; b < nb; ++b) {
    std::memcpy(&x[b].d, grp + L::d_off(b, nb) + 2 * static_cast<std::size_t>(r), 2);
    const uint8_t* qs = grp + L::qs_off(b, nb);
    if constexpr (std::is_same_v<Block, quant::BlockQ5_1>)
      std::memcpy(&x[b].m, qs + repack::kQ51MinOff + 2 * static_cast<std::size_t>(r), 2);
    const uint8_t* hm = qs + repack::kQ5MaskOff;
    for (int c = 0; c < 4; ++c) std::memcpy(&x[b].qs[4 * c], qs + 64 * c + 4 * r, 4);
    uint32_t qh = 0;
    for (int s = 0; s < 8; ++s)
      for (int j = 0; j < 4; ++j) qh |= static_cast<uint32_t>(repack::q5_fifth_bit(hm, s, r, j)) << (4 * s + j);
    std::memcpy(x[b].qh, &qh, 4);
  }
}

// A Q4_K super-block's 8 scales and 8 mins of every row, in the orders layout.h gives them.
// Q4_K and Q5_K (Block, L): Q5_K_R16 is Q4_K_R16 plus the rows' qh bytes (cpu/repack/layout.h).
template <class Block, class L>
void repack_q45_k(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + L::block(b);
    uint8_t usc[128], umin[128];
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const Block*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      std::memcpy(blk + L::kD + 2 * r, &x->d, 2);
      std::memcpy(blk + L::kDmin + 2 * r, &x->dmin, 2);
      for (int g = 0; g < 8; ++g) {
        uint8_t sc, m;
        quant::q4_k_scale_min(g, x->scales, sc, m);
        usc[16 * g + r] = sc;
        umin[32 * (g / 2) + 2 * r + (g % 2)] = m;
      }
      for (int c = 0; c < 32; ++c) std::memcpy(blk + L::kQs + 64 * c + 4 * r, &x->qs[4 * c], 4);
      if constexpr (std::is_same_v<Block, quant::BlockQ5_K>)
        for (int c = 0; c < 8; ++c) std::memcpy(blk + L::kQh + 64 * c + 4 * r, &x->qh[4 * c], 4);
    }
    repack::pack6(usc, blk + L::kScales);
    repack::pack6(umin, blk + L::kMins);
  }
}

// The inverse for one row r of a group: Q4_K's own 12-byte scale packing rebuilt from the values.
template <class Block, class L>
void unpack_q45_k_row(const uint8_t* grp, int r, int64_t nb, Block* x) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + L::block(b);
    uint8_t usc[128], umin[128];
    repack::unpack6(blk + L::kScales, usc);
    repack::unpack6(blk + L::kMins, umin);
    std::memcpy(&x[b].d, blk + L::kD + 2 * r, 2);
    std::memcpy(&x[b].dmin, blk + L::kDmin + 2 * r, 2);
    uint8_t sc[8], m[8];
    for (int g = 0; g < 8; ++g) {
      sc[g] = usc[16 * g + r];
      m[g] = umin[32 * (g / 2) + 2 * r + (g % 2)];
    }
    // ggml's get_scale_min_k4 packing: groups 0..3 in the low 6 bits of bytes 0..7, groups 4..7
    // split into a low nibble (bytes 8..11) and their top 2 bits in bits 6..7 of bytes 0..7.
    uint8_t* q = x[b].scales;
    for (int j = 0; j < 4; ++j) {
      q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
      q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
      q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    for (int c = 0; c < 32; ++c) std::memcpy(&x[b].qs[4 * c], blk + L::kQs + 64 * c + 4 * r, 4);
    if constexpr (std::is_same_v<Block, quant::BlockQ5_K>)
      for (int c = 0; c < 8; ++c) std::memcpy(&x[b].qh[4 * c], blk + L::kQh + 64 * c + 4 * r, 4);
  }
}

void repack_q6_k(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  using L = repack::Q6KLayout;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* qs = dst + L::qs_off(b, nb);
    uint8_t* meta = dst + L::meta_off(b, nb);
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      std::memcpy(meta + 2 * r, &x->d, 2);
      for (int g = 0; g < 16; ++g) std::memcpy(meta + L::kScales + 32 * (g / 2) + 2 * r + g % 2, &x->scales[g], 1);
      for (int c = 0; c < 32; ++c) std::memcpy(qs + 64 * L::ql_chunk(c) + 4 * r, &x->ql[4 * c], 4);
      for (int c = 0; c < 16; ++c) std::memcpy(qs + 64 * L::qh_chunk(c) + 4 * r, &x->qh[4 * c], 4);
    }
  }
}

void unpack_q6_k_row(const uint8_t* grp, int r, int64_t nb, quant::BlockQ6_K* x) {
  using L = repack::Q6KLayout;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qs = grp + L::qs_off(b, nb);
    const uint8_t* meta = grp + L::meta_off(b, nb);
    std::memcpy(&x[b].d, meta + 2 * r, 2);
    for (int g = 0; g < 16; ++g) std::memcpy(&x[b].scales[g], meta + L::kScales + 32 * (g / 2) + 2 * r + g % 2, 1);
    for (int c = 0; c < 32; ++c) std::memcpy(&x[b].ql[4 * c], qs + 64 * L::ql_chunk(c) + 4 * r, 4);
    for (int c = 0; c < 16; ++c) std::memcpy(&x[b].qh[4 * c], qs + 64 * L::qh_chunk(c) + 4 * r, 4);
  }
}

// Q2_K: per block the rows' d and dmin, their scale bytes in (2k, 2k + 1) pairs, the qs bytes in 4-byte
// chunks (layout.h).
void repack_q2_k(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  using L = repack::Q2KLayout;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + L::block(b);
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const quant::BlockQ2_K*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      std::memcpy(blk + L::kD + 2 * r, &x->d, 2);
      std::memcpy(blk + L::kDmin + 2 * r, &x->dmin, 2);
      for (int g = 0; g < 16; ++g) blk[L::kScales + 32 * (g / 2) + 2 * r + g % 2] = x->scales[g];
      for (int c = 0; c < 16; ++c) std::memcpy(blk + L::kQs + 64 * c + 4 * r, &x->qs[4 * c], 4);
    }
  }
}

// The inverse for one row r of a group.
void unpack_q2_k_row(const uint8_t* grp, int r, int64_t nb, quant::BlockQ2_K* x) {
  using L = repack::Q2KLayout;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + L::block(b);
    std::memcpy(&x[b].d, blk + L::kD + 2 * r, 2);
    std::memcpy(&x[b].dmin, blk + L::kDmin + 2 * r, 2);
    for (int g = 0; g < 16; ++g) x[b].scales[g] = blk[L::kScales + 32 * (g / 2) + 2 * r + g % 2];
    for (int c = 0; c < 16; ++c) std::memcpy(&x[b].qs[4 * c], blk + L::kQs + 64 * c + 4 * r, 4);
  }
}

// Q3_K: per block the rows' d, their 16 sub-block scales as 6-bit codes, the hmask and qs bytes in
// 4-byte chunks (layout.h).
void repack_q3_k(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  using L = repack::Q3KLayout;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* qs = dst + L::qs_off(b, nb);
    uint8_t* meta = dst + L::meta_off(b, nb);
    uint8_t u[256];
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const quant::BlockQ3_K*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      std::memcpy(meta + 2 * r, &x->d, 2);
      for (int j = 0; j < 16; ++j) u[16 * j + r] = static_cast<uint8_t>(quant::q3_k_scale(x->scales, j) + 32);
      for (int t = 0; t < 8; ++t) {
        std::memcpy(qs + 64 * L::hm_chunk(t) + 4 * r, &x->hmask[4 * t], 4);
        for (int h = 0; h < 2; ++h) std::memcpy(qs + 64 * L::qs_chunk(h, t) + 4 * r, &x->qs[32 * h + 4 * t], 4);
      }
    }
    repack::pack6(u, meta + L::kScales);
    repack::pack6(u + 128, meta + L::kScales + 96);
  }
}

// The inverse for one row r of a group: Q3_K's 12-byte scale packing (quant::q3_k_scale) rebuilt.
void unpack_q3_k_row(const uint8_t* grp, int r, int64_t nb, quant::BlockQ3_K* x) {
  using L = repack::Q3KLayout;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qs = grp + L::qs_off(b, nb);
    const uint8_t* meta = grp + L::meta_off(b, nb);
    uint8_t u[256];
    repack::unpack6(meta + L::kScales, u);
    repack::unpack6(meta + L::kScales + 96, u + 128);
    std::memcpy(&x[b].d, meta + 2 * r, 2);
    uint8_t* s = x[b].scales;
    std::memset(s, 0, 12);
    for (int j = 0; j < 16; ++j) {
      const int v = u[16 * j + r];
      s[j % 8] = static_cast<uint8_t>(s[j % 8] | ((v & 15) << (4 * (j / 8))));
      s[8 + j % 4] = static_cast<uint8_t>(s[8 + j % 4] | ((v >> 4) << (2 * (j / 4))));
    }
    for (int t = 0; t < 8; ++t) {
      std::memcpy(&x[b].hmask[4 * t], qs + 64 * L::hm_chunk(t) + 4 * r, 4);
      for (int h = 0; h < 2; ++h) std::memcpy(&x[b].qs[32 * h + 4 * t], qs + 64 * L::qs_chunk(h, t) + 4 * r, 4);
    }
  }
}

// IQ4_XS: the 8 sub-block scale codes of every row packed as layout.h gives them, the quants in
// 4-byte chunks.
void repack_iq4_xs(const uint8_t* src, std::size_t row_bytes, int64_t nb, uint8_t* dst) {
  using L = repack::IQ4XSLayout;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + L::block(b);
    uint8_t u[128];
    for (int r = 0; r < repack::kRows; ++r) {
      const auto* x = reinterpret_cast<const quant::BlockIQ4_XS*>(src + static_cast<std::size_t>(r) * row_bytes) + b;
      std::memcpy(blk + L::kD + 2 * r, &x->d, 2);
      for (int g = 0; g < 8; ++g) u[16 * g + r] = static_cast<uint8_t>(quant::iq4_xs_scale(*x, g) + 32);
      for (int c = 0; c < 32; ++c) std::memcpy(blk + L::kQs + 64 * c + 4 * r, &x->qs[4 * c], 4);
    }
    repack::pack6(u, blk + L::kScales);
  }
}

// The inverse for one row r of a group: IQ4_XS's scales_l nibbles and scales_h bit pairs rebuilt.
void unpack_iq4_xs_row(const uint8_t* grp, int r, int64_t nb, quant::BlockIQ4_XS* x) {
  using L = repack::IQ4XSLayout;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + L::block(b);
    uint8_t u[128];
    repack::unpack6(blk + L::kScales, u);
    std::memcpy(&x[b].d, blk + L::kD + 2 * r, 2);
    unsigned h = 0;
    for (int g = 0; g < 8; ++g) h |= static_cast<unsigned>(u[16 * g + r] >> 4) << (2 * g);
    x[b].scales_h = static_cast<uint16_t>(h);
    for (int j = 0; j < 4; ++j)
      x[b].scales_l[j] = static_cast<uint8_t>((u[16 * (2 * j) + r] & 15) | ((u[16 * (2 * j + 1) + r] & 15) << 4));
    for (int c = 0; c < 32; ++c) std::memcpy(&x[b].qs[4 * c], blk + L::kQs + 64 * c + 4 * r, 4);
  }
}

}  // namespace

GGMLType repacked_type(GGMLType t) {
  for (const auto& [plain, repacked] : kRepackedForms)
    if (plain == t) return repacked;
  return t;
}

GGMLType plain_type(GGMLType t) {
  for (const auto& [plain, repacked] : kRepackedForms)
    if (repacked == t) return plain;
  return t;
}

bool is_repacked(GGMLType t) { return plain_type(t) != t; }

bool can_repack(GGMLType t, int64_t rows) { return repacked_type(t) != t && rows > 0 && rows % kRepackRows == 0; }

bool repack_pays(GGMLType t, Isa isa) {
  // Measured with bench/gemv_bench.py (docs/benchmarks.md, GEMV): every format gains on AVX-512
  // VNNI and on AVX2 (one scale conversion per 16 rows, no per-row horizontal sums; Q4_K: its
  // 6-bit scales unpacked for 16 rows at once instead of decoded per row and block; IQ4_XS: one
  // codebook lookup per 16 rows' 4 columns, docs/benchmarks.md "Repacked IQ4_XS"; Q5_0: one mask per
  // 4-column step for 16 rows' fifth bits, from memory at one thread on a Zen 4 4.3 -> 11.9 GB/s on AVX2 and
  // 4.8 -> 23-29 on AVX-512, docs/benchmarks.md "Result, session 46").
  // Q5_1 (Q5_0_R16 plus the rows' mins) and IQ4_NL (Q4_0_R16's bytes, each nibble looked up in the codebook):
  // from memory at one thread on a Zen 4 4.1 -> 20.5 and 6.9 -> 19.7 GB/s on AVX2, 5.0 -> 28.1 and 7.2 -> 28.4 on
  // AVX-512 (docs/benchmarks.md, "Result, session 47").
  // Q3_K and Q5_K: AVX-512 only. The AVX2 Q3_K_R16 kernel streams 6-10 % faster than the plain one with the
  // Intel software prefetch and ~18 % slower without it (the default elsewhere), so AVX2 keeps plain Q3_K
  // (repack=on uses that kernel); the AVX2 path has no Q5_K_R16 kernel (it would run the scalar reference).
  switch (isa) {
    case Isa::Avx512:
      return t == GGMLType::Q4_0 || t == GGMLType::Q5_0 || t == GGMLType::Q8_0 || t == GGMLType::Q2_K ||
             t == GGMLType::Q3_K || t == GGMLType::Q4_K || t == GGMLType::Q5_K || t == GGMLType::Q6_K ||
             t == GGMLType::IQ4_XS || t == GGMLType::IQ4_NL || t == GGMLType::Q5_1;
    case Isa::Avx2:
      return t == GGMLType::Q4_0 || t == GGMLType::Q5_0 || t == GGMLType::Q8_0 || t == GGMLType::Q2_K ||
             t == GGMLType::Q4_K || t == GGMLType::Q6_K || t == GGMLType::IQ4_XS || t == GGMLType::IQ4_NL ||
             t == GGMLType::Q5_1;
    default: return false;
  }
}

bool should_repack(RepackMode mode, GGMLType t, int64_t rows) {
  if (!can_repack(t, rows)) return false;
  switch (mode) {
    case RepackMode::On: return true;
    case RepackMode::Off: return false;
    case RepackMode::Auto: return repack_pays(t, active_isa());
  }
  return false;
}

RepackMode repack_mode() { return process_cpu_settings().repack; }

void repack_rows(GGMLType t, const void* src, int64_t rows, int64_t cols, void* dst) {
  if (!can_repack(t, rows))
    throw_error(ErrorKind::Value, std::string("repack: ") + quant::type_name(t) + " matrix of " + std::to_string(rows) +
                                      " rows has no repacked form (Q4_0 / Q5_0 / Q8_0 / Q2_K / Q3_K / Q4_K / Q5_K / "
                                      "Q6_K / IQ4_XS / IQ4_NL / Q5_1, rows a multiple of 16)");
  const std::size_t rb = quant::row_bytes(t, cols);
  const int64_t nb = cols / quant::block_size(t);
  const std::size_t group = rb * repack::kRows;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g < rows / repack::kRows; ++g) {
    const std::size_t off = static_cast<std::size_t>(g) * group;
    if (t == GGMLType::Q8_0)
      repack_q8_0(s + off, rb, nb, d + off);
    else if (t == GGMLType::Q4_K)
      repack_q45_k<quant::BlockQ4_K, repack::Q4KLayout>(s + off, rb, nb, d + off);
    else if (t == GGMLType::Q5_K)
      repack_q45_k<quant::BlockQ5_K, repack::Q5KLayout>(s + off, rb, nb, d + off);
    else if (t == GGMLType::Q6_K)
      repack_q6_k(s + off, rb, nb, d + off);
    else if (t == GGMLType::Q3_K)
      repack_q3_k(s + off, rb, nb, d + off);
    else if (t == GGMLType::Q2_K)
      repack_q2_k(s + off, rb, nb, d + off);
    else if (t == GGMLType::IQ4_XS)
      repack_iq4_xs(s + off, rb, nb, d + off);
    else if (t == GGMLType::Q5_0)
      repack_q5<quant::BlockQ5_0, repack::Q5Layout>(s + off, rb, nb, d + off);
    else if (t == GGMLType::Q5_1)
      repack_q5<quant::BlockQ5_1, repack::Q51Layout>(s + off, rb, nb, d + off);
    else  // Q4_0 and IQ4_NL: the same block bytes (d, 16 bytes of nibbles)
      repack_q4_0(s + off, rb, nb, d + off);
  }
}

void unpack_rows(GGMLType rt, const void* src, int64_t rows, int64_t cols, void* dst) {
  const GGMLType t = plain_type(rt);
  if (t == rt || !can_repack(t, rows))
    throw_error(ErrorKind::Value, std::string("unpack: ") + quant::type_name(rt) + " is not a repacked matrix");
  const std::size_t rb = quant::row_bytes(t, cols);
  const int64_t nb = cols / quant::block_size(t);
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g < rows / repack::kRows; ++g) {
    const uint8_t* grp = s + static_cast<std::size_t>(g) * rb * repack::kRows;
    for (int r = 0; r < repack::kRows; ++r) {
      uint8_t* row = d + (static_cast<std::size_t>(g) * repack::kRows + static_cast<std::size_t>(r)) * rb;
      if (t == GGMLType::Q4_K) {
        unpack_q45_k_row<quant::BlockQ4_K, repack::Q4KLayout>(grp, r, nb, reinterpret_cast<quant::BlockQ4_K*>(row));
        continue;
      }
      if (t == GGMLType::Q5_K) {
        unpack_q45_k_row<quant::BlockQ5_K, repack::Q5KLayout>(grp, r, nb, reinterpret_cast<quant::BlockQ5_K*>(row));
        continue;
      }
      if (t == GGMLType::Q6_K) {
        unpack_q6_k_row(grp, r, nb, reinterpret_cast<quant::BlockQ6_K*>(row));
        continue;
      }
      if (t == GGMLType::Q3_K) {
        unpack_q3_k_row(grp, r, nb, reinterpret_cast<quant::BlockQ3_K*>(row));
        continue;
      }
      if (t == GGMLType::Q2_K) {
        unpack_q2_k_row(grp, r, nb, reinterpret_cast<quant::BlockQ2_K*>(row));
        continue;
      }
      if (t == GGMLType::IQ4_XS) {
        unpack_iq4_xs_row(grp, r, nb, reinterpret_cast<quant::BlockIQ4_XS*>(row));
        continue;
      }
      if (t == GGMLType::Q5_0) {
        unpack_q5_row<quant::BlockQ5_0, repack::Q5Layout>(grp, r, nb, reinterpret_cast<quant::BlockQ5_0*>(row));
        continue;
      }
      if (t == GGMLType::Q5_1) {
        unpack_q5_row<quant::BlockQ5_1, repack::Q51Layout>(grp, r, nb, reinterpret_cast<quant::BlockQ5_1*>(row));
        continue;
      }
      for (int64_t b = 0; b < nb; ++b) {
        if (t == GGMLType::Q8_0) {
          using L = repack::Q8Layout;
          auto* x = reinterpret_cast<quant::BlockQ8_0*>(row) + b;
          std::memcpy(&x->d, grp + L::d_off(b, nb) + 2 * static_cast<std::size_t>(r), 2);
          for (int k = 0; k < 8; ++k)
            for (int j = 0; j < 4; ++j)
              x->qs[4 * k + j] =
                  static_cast<int8_t>(grp[L::qs_off(b, nb) + 64 * static_cast<std::size_t>(k) +
                                          4 * static_cast<std::size_t>(r) + static_cast<std::size_t>(j)] ^
                                      0x80u);
        } else {
          using L = repack::Q4Layout;
          auto* x = reinterpret_cast<quant::BlockQ4_0*>(row) + b;
          std::memcpy(&x->d, grp + L::d_off(b, nb) + 2 * static_cast<std::size_t>(r), 2);
          for (int c = 0; c < 4; ++c)
            std::memcpy(&x->qs[4 * c],
                        grp + L::qs_off(b, nb) + 64 * static_cast<std::size_t>(c) + 4 * static_cast<std::size_t>(r), 4);
        }
      }
    }
  }
}

void repack_rows_in_place(GGMLType t, void* data, int64_t rows, int64_t cols) {
  if (!can_repack(t, rows)) repack_rows(t, data, rows, cols, data);  // throws the same error
  const std::size_t bytes = static_cast<std::size_t>(rows) * quant::row_bytes(t, cols);
  t_scratch.resize(bytes);  // grows only
  std::memcpy(t_scratch.data(), data, bytes);
  repack_rows(t, t_scratch.data(), rows, cols, data);
}

}  // namespace strata::cpu
