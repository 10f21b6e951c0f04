// ggml's reference quantization rules, the element-wise float conversions, the Q8_K activation
// form, and the per-type / per-matrix entry points. Q4_0's Lloyd fit lives in q4_0_lloyd.cpp.
#include "strata/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "strata/util/error.h"
#include "strata/util/fp16.h"
#include "strata/util/thread_pool.h"

namespace strata::quant {
namespace {

// The block's value of largest magnitude with its sign (the first one on ties, as ggml).
float signed_absmax(const float* x, int n, float& amax) {
  amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float v = x[j];
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  return max;
}

// Round half to even through the float adder, exactly as ggml's nearest_int (|v| < 2^22).
inline int nearest_int(float v) {
  const float f = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &f, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// A rounded value known to lie within int8 range, or NaN (a NaN activation) which becomes 0
// instead of an undefined conversion.
inline int8_t to_i8(float r) { return r == r ? static_cast<int8_t>(r) : int8_t{0}; }

}  // namespace

void require_quantizer(GGMLType type, QuantMethod method) {
  if (!has_quantizer(type, method))
    throw_error(ErrorKind::Value, std::string("no ") + (method == QuantMethod::Lloyd ? "Lloyd " : "") +
                                      "quantizer for type " + type_name(type) +
                                      (method == QuantMethod::Lloyd ? " (Lloyd is Q4_0 only)" : ""));
}

bool has_quantizer(GGMLType type, QuantMethod method) {
  if (method == QuantMethod::Lloyd) return type == GGMLType::Q4_0;
  switch (type) {
    case GGMLType::F32:
    case GGMLType::F16:
    case GGMLType::BF16:
    case GGMLType::Q8_0:
    case GGMLType::Q5_0:
    case GGMLType::Q5_1:
    case GGMLType::Q4_0: return true;
    default: return false;
  }
}

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    float amax = 0.0f;
    for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK32; ++j) y[i].qs[j] = to_i8(std::roundf(x[j] * id));
  }
}

void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    float amax;
    const float max = signed_absmax(x, kQK32, amax);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    float min = x[0];
    float max = x[0];
    for (int j = 1; j < kQK32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(31, static_cast<int>((x[j + 16] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    float amax;
    const float max = signed_absmax(x, kQK32, amax);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = 127.0f / amax;
    for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::clamp(nearest_int(iscale * x[j]), -127, 127));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[i].qs[16 * g + j];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

void quantize_row(GGMLType type, const float* src, void* dst, int64_t n, QuantMethod method) {
  require_quantizer(type, method);
  (void)row_bytes(type, n);  // validates n against the block
  if (block_size(type) > 1) {
    // The block rules divide by the block's largest magnitude: NaN or infinity has no encoding.
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(src[i]))
        throw_error(ErrorKind::Value, std::string("cannot quantize a non-finite value (element ") + std::to_string(i) +
                                          " of the row) to " + type_name(type));
  }
  switch (type) {
    case GGMLType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); return;
    case GGMLType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case GGMLType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case GGMLType::Q8_0: return quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
    case GGMLType::Q5_0: return quantize_row_q5_0(src, static_cast<BlockQ5_0*>(dst), n);
    case GGMLType::Q5_1: return quantize_row_q5_1(src, static_cast<BlockQ5_1*>(dst), n);
    case GGMLType::Q4_0:
      if (method == QuantMethod::Lloyd) return quantize_row_q4_0_lloyd(src, static_cast<BlockQ4_0*>(dst), n);
      return quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
    default: break;
  }
  throw_error(ErrorKind::Internal, std::string("quantize_row: unhandled type ") + type_name(type));
}

void quantize_matrix(GGMLType type, const float* src, int64_t rows, int64_t cols, void* dst, QuantMethod method,
                     ThreadPool* pool) {
  require_quantizer(type, method);
  if (rows < 0) throw_error(ErrorKind::Value, "quantize_matrix: negative row count");
  const std::size_t stride = row_bytes(type, cols);
  auto* out = static_cast<uint8_t*>(dst);
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      quantize_row(type, src + r * cols, out + static_cast<std::size_t>(r) * stride, cols, method);
  };
  // Lloyd costs far more per element than the plain rules: split finer.
  const int64_t per_chunk_elems = method == QuantMethod::Lloyd ? (1 << 14) : (1 << 18);
  const int64_t grain = std::max<int64_t>(1, per_chunk_elems / std::max<int64_t>(1, cols));
  if (pool == nullptr) {
    body(0, rows);
  } else {
    pool->parallel_for(rows, grain, body);
  }
}

}  // namespace strata::quant
