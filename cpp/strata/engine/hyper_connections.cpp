#include "strata/engine/hyper_connections.h"

#include <cmath>

#include "strata/engine/ops.h"

namespace strata::engine {

void hc_coefficients(const float* mix, const float* scale, const float* base, int n, int sinkhorn_iters, float eps,
                     float* pre, float* post, float* comb) {
  for (int s = 0; s < n; ++s) {
    pre[s] = sigmoid(mix[s] * scale[0] + base[s]) + eps;
    post[s] = 2.0f * sigmoid(mix[n + s] * scale[1] + base[n + s]);
  }
  const int o = 2 * n;
  for (int j = 0; j < n; ++j) {
    float* row = comb + j * n;
    for (int k = 0; k < n; ++k) row[k] = mix[o + j * n + k] * scale[2] + base[o + j * n + k];
    softmax(row, n);
    for (int k = 0; k < n; ++k) row[k] += eps;
  }
  auto normalize_columns = [&] {
    for (int k = 0; k < n; ++k) {
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum += comb[j * n + k];
      const float den = sum + eps;
      for (int j = 0; j < n; ++j) comb[j * n + k] /= den;
    }
  };
  auto normalize_rows = [&] {
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < n; ++k) sum += comb[j * n + k];
      const float den = sum + eps;
      for (int k = 0; k < n; ++k) comb[j * n + k] /= den;
    }
  };
  normalize_columns();
  for (int it = 1; it < sinkhorn_iters; ++it) {
    normalize_rows();
    normalize_columns();
  }
}

void hc_head_pre(const float* mix, const float* scale, const float* base, int n, float eps, float* pre) {
  for (int s = 0; s < n; ++s) pre[s] = sigmoid(mix[s] * scale[0] + base[s]) + eps;
}

void hc_collapse(const float* X, int n, int64_t d, const float* pre, float* out) {
  for (int64_t i = 0; i < d; ++i) out[i] = pre[0] * X[i];
  for (int s = 1; s < n; ++s) {
    const float* xs = X + s * d;
    const float w = pre[s];
    for (int64_t i = 0; i < d; ++i) out[i] += w * xs[i];
  }
}

}  // namespace strata::engine
