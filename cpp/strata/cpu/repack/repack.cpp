#include "strata/cpu/repack/repack.h"

#include <cstring>
#include <string>

#include "strata/cpu/repack/layout.h"
#include "strata/util/aligned.h"
#include "strata/util/error.h"

namespace strata::cpu {
namespace {

using quant::GGMLType;

thread_local AlignedBuffer<uint8_t> t_scratch;

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

}  // namespace

GGMLType repacked_type(GGMLType t) {
  switch (t) {
    case GGMLType::Q4_0: return GGMLType::Q4_0_R16;
    case GGMLType::Q8_0: return GGMLType::Q8_0_R16;
    default: return t;
  }
}

GGMLType plain_type(GGMLType t) {
  switch (t) {
    case GGMLType::Q4_0_R16: return GGMLType::Q4_0;
    case GGMLType::Q8_0_R16: return GGMLType::Q8_0;
    default: return t;
  }
}

bool is_repacked(GGMLType t) { return plain_type(t) != t; }

bool can_repack(GGMLType t, int64_t rows) { return repacked_type(t) != t && rows > 0 && rows % kRepackRows == 0; }

bool repack_pays(GGMLType t, Isa isa) {
  // Measured with bench/gemv_bench.py (docs/benchmarks.md, GEMV): both formats gain on AVX-512
  // VNNI and on AVX2 (one scale conversion per 16 rows, no per-row horizontal sums).
  switch (isa) {
    case Isa::Avx512:
    case Isa::Avx2: return t == GGMLType::Q4_0 || t == GGMLType::Q8_0;
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
                                      " rows has no repacked form (Q4_0 / Q8_0, rows a multiple of 16)");
  const std::size_t rb = quant::row_bytes(t, cols);
  const int64_t nb = cols / quant::kQK32;
  const std::size_t group = rb * repack::kRows;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g < rows / repack::kRows; ++g) {
    const std::size_t off = static_cast<std::size_t>(g) * group;
    if (t == GGMLType::Q8_0)
      repack_q8_0(s + off, rb, nb, d + off);
    else
      repack_q4_0(s + off, rb, nb, d + off);
  }
}

void unpack_rows(GGMLType rt, const void* src, int64_t rows, int64_t cols, void* dst) {
  const GGMLType t = plain_type(rt);
  if (t == rt || !can_repack(t, rows))
    throw_error(ErrorKind::Value, std::string("unpack: ") + quant::type_name(rt) + " is not a repacked matrix");
  const std::size_t rb = quant::row_bytes(t, cols);
  const int64_t nb = cols / quant::kQK32;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g < rows / repack::kRows; ++g) {
    const uint8_t* grp = s + static_cast<std::size_t>(g) * rb * repack::kRows;
    for (int r = 0; r < repack::kRows; ++r) {
      uint8_t* row = d + (static_cast<std::size_t>(g) * repack::kRows + static_cast<std::size_t>(r)) * rb;
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
