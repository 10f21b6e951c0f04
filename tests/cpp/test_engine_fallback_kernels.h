#pragma once
// TEMPORARY (until the quant helper's kernels land in main): scalar F32/F16 gemv, gemm and
// dequantize_row so the engine tests link. Include in exactly one file per test binary.
#include <cstdint>
#include <cstring>

#include "strata/cpu/gemv.h"
#include "strata/util/error.h"
#include "strata/util/fp16.h"
#include "strata/util/thread_pool.h"

namespace strata::quant {
void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n) {
  if (type == GGMLType::F32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
  } else if (type == GGMLType::F16) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
  } else {
    throw_error(ErrorKind::Internal, "fallback dequantize_row: type not supported in tests");
  }
}
}  // namespace strata::quant

namespace strata::cpu {
namespace {
float fallback_dot(quant::GGMLType type, const uint8_t* row, const float* x, int64_t cols) {
  float acc = 0.0f;
  if (type == quant::GGMLType::F32) {
    const auto* w = reinterpret_cast<const float*>(row);
    for (int64_t i = 0; i < cols; ++i) acc += w[i] * x[i];
  } else if (type == quant::GGMLType::F16) {
    const auto* w = reinterpret_cast<const uint16_t*>(row);
    for (int64_t i = 0; i < cols; ++i) acc += fp16_to_fp32(w[i]) * x[i];
  } else {
    throw_error(ErrorKind::Internal, "fallback gemv: type not supported in tests");
  }
  return acc;
}
}  // namespace

void gemv(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* x, float* y, ThreadPool* pool) {
  const std::size_t rb = quant::row_bytes(type, cols);
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) y[r] = fallback_dot(type, static_cast<const uint8_t*>(W) + rb * static_cast<std::size_t>(r), x, cols);
  };
  auto ref = [&body](int64_t b, int64_t e) { body(b, e); };  // one reference: std::function stays inline
  if (pool) pool->parallel_for(rows, 16, ref); else body(0, rows);
}

void gemm(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* X, int64_t nx, float* Y,
          ThreadPool* pool) {
  for (int64_t i = 0; i < nx; ++i) gemv(type, W, rows, cols, X + i * cols, Y + i * rows, pool);
}
}  // namespace strata::cpu
