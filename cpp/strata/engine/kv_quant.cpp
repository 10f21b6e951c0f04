#include "strata/engine/kv_quant.h"

#include <algorithm>
#include <cmath>

#include "strata/util/fp16.h"

namespace strata::engine {

void kv_quantize(const float* x, int n, int8_t* q, uint16_t* scales) {
  for (int b0 = 0, b = 0; b0 < n; b0 += kKvBlock, ++b) {
    const int b1 = std::min(n, b0 + kKvBlock);
    float amax = 0.0f;
    for (int i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const uint16_t s16 = fp32_to_fp16(amax / 127.0f);
    const float s = fp16_to_fp32(s16);
    scales[b] = s16;
    for (int i = b0; i < b1; ++i) {
      if (s == 0.0f) {
        q[i] = 0;
        continue;
      }
      const float r = std::nearbyint(x[i] / s);  // default rounding mode: half to even
      q[i] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
    }
  }
}

void kv_dequantize(const int8_t* q, const uint16_t* scales, int n, float* x) {
  for (int b0 = 0, b = 0; b0 < n; b0 += kKvBlock, ++b) {
    const int b1 = std::min(n, b0 + kKvBlock);
    const float s = fp16_to_fp32(scales[b]);
    for (int i = b0; i < b1; ++i) x[i] = static_cast<float>(q[i]) * s;
  }
}

float kv_dot(const VecKernels& k, const float* a, const int8_t* q, const uint16_t* scales, int n) {
  float total = 0.0f;
  for (int b0 = 0, b = 0; b0 < n; b0 += kKvBlock, ++b) {
    const int len = std::min(n - b0, kKvBlock);
    total += k.dot_i8(a + b0, q + b0, len) * fp16_to_fp32(scales[b]);
  }
  return total;
}

void kv_axpy(const VecKernels& k, float w, const int8_t* q, const uint16_t* scales, int n, float* out) {
  for (int b0 = 0, b = 0; b0 < n; b0 += kKvBlock, ++b) {
    const int len = std::min(n - b0, kKvBlock);
    k.axpy_i8(w * fp16_to_fp32(scales[b]), q + b0, len, out + b0);
  }
}

}  // namespace strata::engine
