#pragma once
// Shared by the test_quant*.cpp binaries: random weight rows of every supported format (random
// bytes with sane fp16 scales: finite, moderate magnitude) and float64 reference helpers.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/cpu/repack/repack.h"
#include "strata/quant/blocks.h"
#include "strata/quant/dequantize.h"
#include "strata/quant/types.h"
#include "strata/util/fp16.h"

namespace quant_test {

using strata::quant::GGMLType;

// The kernel paths this build has and this CPU runs.
inline std::vector<strata::cpu::Isa> runnable_isas() {
  std::vector<strata::cpu::Isa> v;
  for (strata::cpu::Isa isa : strata::cpu::compiled_isas())
    if (strata::cpu::isa_supported(isa)) v.push_back(isa);
  return v;
}

// Restores the dispatch ISA at scope exit.
struct IsaGuard {
  strata::cpu::Isa saved = strata::cpu::active_isa();
  ~IsaGuard() { strata::cpu::force_isa(saved); }
};

inline const std::vector<GGMLType>& all_types() {
  static const std::vector<GGMLType> v{
      GGMLType::F32,    GGMLType::F16,     GGMLType::BF16, GGMLType::Q8_0,   GGMLType::Q4_0,    GGMLType::Q5_0,
      GGMLType::Q4_K,   GGMLType::Q6_K,    GGMLType::Q2_K, GGMLType::IQ4_XS, GGMLType::Q3_K,    GGMLType::Q5_K,
      GGMLType::IQ2_XS, GGMLType::IQ3_XXS, GGMLType::Q5_1, GGMLType::IQ4_NL, GGMLType::IQ2_XXS, GGMLType::IQ3_S,
      GGMLType::IQ2_S,  GGMLType::IQ1_S,   GGMLType::IQ1_M};
  return v;
}

inline uint16_t random_scale(std::mt19937& rng, float lo, float hi, bool allow_negative) {
  std::uniform_real_distribution<float> mag(lo, hi);
  float v = mag(rng);
  if (allow_negative && (rng() & 1u)) v = -v;
  return strata::fp32_to_fp16(v);
}

// `rows` rows of `cols` elements of `type`, random but valid.
inline std::vector<uint8_t> random_rows(GGMLType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  using namespace strata::quant;
  const std::size_t stride = row_bytes(type, cols);
  std::vector<uint8_t> buf(stride * static_cast<std::size_t>(rows));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (type == GGMLType::F32 || type == GGMLType::F16 || type == GGMLType::BF16) {
    const int64_t n = rows * cols;
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      if (type == GGMLType::F32) {
        std::memcpy(buf.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = type == GGMLType::F16 ? strata::fp32_to_fp16(v) : strata::fp32_to_bf16(v);
        std::memcpy(buf.data() + 2 * i, &h, 2);
      }
    }
    return buf;
  }
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const std::size_t bs = type_size(type);
  for (std::size_t off = 0; off < buf.size(); off += bs) {
    uint8_t* p = buf.data() + off;
    auto put = [&](std::size_t at, uint16_t h) { std::memcpy(p + at, &h, 2); };
    switch (type) {
      case GGMLType::Q4_0:
      case GGMLType::Q5_0:
      case GGMLType::Q8_0:
      case GGMLType::IQ4_NL: put(0, random_scale(rng, 1e-3f, 0.1f, true)); break;
      case GGMLType::Q5_1:
        put(0, random_scale(rng, 1e-3f, 0.1f, true));
        put(2, random_scale(rng, 1e-3f, 0.1f, true));
        break;
      case GGMLType::Q2_K:
        put(80, random_scale(rng, 1e-3f, 0.05f, true));
        put(82, random_scale(rng, 1e-3f, 0.05f, true));
        break;
      case GGMLType::Q4_K:
        put(0, random_scale(rng, 1e-3f, 0.05f, true));
        put(2, random_scale(rng, 1e-3f, 0.05f, true));
        break;
      case GGMLType::Q6_K: put(208, random_scale(rng, 1e-3f, 0.05f, true)); break;
      case GGMLType::IQ4_XS: put(0, random_scale(rng, 1e-3f, 0.05f, true)); break;
      case GGMLType::Q3_K: put(108, random_scale(rng, 1e-3f, 0.05f, true)); break;
      case GGMLType::Q5_K:
        put(0, random_scale(rng, 1e-3f, 0.05f, true));
        put(2, random_scale(rng, 1e-3f, 0.05f, true));
        break;
      case GGMLType::IQ2_XXS:
      case GGMLType::IQ2_XS:
      case GGMLType::IQ3_XXS:
      case GGMLType::IQ3_S:
      case GGMLType::IQ2_S:
      case GGMLType::IQ1_S: put(0, random_scale(rng, 1e-3f, 0.05f, true)); break;
      case GGMLType::IQ1_M: {  // d is the top nibbles of the 4 scale words (bytes 48..55), lowest first
        const uint16_t d = random_scale(rng, 1e-3f, 0.05f, true);
        for (int w = 0; w < 4; ++w) {
          uint16_t word;
          std::memcpy(&word, p + 48 + 2 * w, 2);
          put(48 + 2 * w, static_cast<uint16_t>((word & 0x0FFF) | (((d >> (4 * w)) & 0xF) << 12)));
        }
        break;
      }
      default: break;
    }
  }
  return buf;
}

// Rows of plain type t (whole 16-row groups) in their repacked form (cpu/repack).
inline std::vector<uint8_t> repacked(GGMLType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  std::vector<uint8_t> r(w.size());
  strata::cpu::repack_rows(t, w.data(), rows, cols, r.data());
  return r;
}

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

inline std::vector<float> dequant(GGMLType type, const uint8_t* row, int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  strata::quant::dequantize_row(type, row, v.data(), n);
  return v;
}

// The activation values a kernel actually multiplies with (its q8 form decoded).
inline std::vector<float> decoded_activation(GGMLType act_type, const uint8_t* act, int64_t n) {
  using namespace strata::quant;
  if (act_type == GGMLType::F32) {
    std::vector<float> v(static_cast<std::size_t>(n));
    std::memcpy(v.data(), act, static_cast<std::size_t>(n) * 4);
    return v;
  }
  if (act_type == GGMLType::Q8_0) return dequant(GGMLType::Q8_0, act, n);
  std::vector<float> v(static_cast<std::size_t>(n));
  const auto* b = reinterpret_cast<const BlockQ8_K*>(act);
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = b[i / kQK_K].d * static_cast<float>(b[i / kQK_K].qs[i % kQK_K]);
  return v;
}

struct Ref {
  double dot = 0.0;
  double abs_sum = 0.0;  // Σ|w_j a_j|: the scale that float rounding errors are relative to
};
inline Ref ref_dot(const std::vector<float>& w, const std::vector<float>& a) {
  Ref r;
  for (std::size_t j = 0; j < w.size(); ++j) {
    r.dot += static_cast<double>(w[j]) * static_cast<double>(a[j]);
    r.abs_sum += std::fabs(static_cast<double>(w[j]) * static_cast<double>(a[j]));
  }
  return r;
}

}  // namespace quant_test
