#include "strata/engine/ops.h"

#include <cmath>

#include "strata/engine/vec_dot.h"

namespace strata::engine {

float sum_squares(const float* x, int64_t n) { return dot_f32(x, x, n); }

void rms_norm(const float* x, int64_t n, float eps, const float* w, float* out) {
  const float mean = sum_squares(x, n) / static_cast<float>(n);
  const float r = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * r) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * r;
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float silu(float x) { return x / (1.0f + exp_f32(-x)); }

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* g, const float* u, float* h, int64_t n) { vec_kernels().swiglu(g, u, h, n); }

void swiglu_clamped(const float* g, const float* u, float* h, int64_t n, float limit) {
  if (limit <= 0.0f) {
    swiglu(g, u, h, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) h[i] = silu(std::fmin(g[i], limit)) * std::fmax(-limit, std::fmin(u[i], limit));
}

}  // namespace strata::engine
