#include "strata/engine/attention_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace strata::engine {

void attend_head(const KvCells& kv, int layer, int kv_head, const float* q, const int32_t* cells, int64_t n,
                 float* scores, float* chunk_o, float* out) {
  const int dh = kv.head_dim();
  const float sqrt_dh = std::sqrt(static_cast<float>(dh));
  std::memset(out, 0, sizeof(float) * static_cast<std::size_t>(dh));
  if (n <= 0) return;
  const VecKernels& vk = vec_kernels();
  auto cell = [cells](int64_t i) -> int64_t { return cells ? cells[i] : i; };
  for (int64_t i = 0; i < n; ++i) scores[i] = kv.dot_k(vk, layer, cell(i), kv_head, q) / sqrt_dh;
  // Global max over the chunk maxima (= the max of all scores).
  float big = -INFINITY;
  for (int64_t i = 0; i < n; ++i) big = std::max(big, scores[i]);
  float denom = 0.0f;
  for (int64_t c0 = 0; c0 < n; c0 += kSoftmaxChunk) {
    const int64_t c1 = std::min(n, c0 + kSoftmaxChunk);
    float m = -INFINITY;
    for (int64_t i = c0; i < c1; ++i) m = std::max(m, scores[i]);
    std::memset(chunk_o, 0, sizeof(float) * static_cast<std::size_t>(dh));
    float l = 0.0f;
    for (int64_t i = c0; i < c1; ++i) {
      const float e = std::exp(scores[i] - m);
      l += e;
      kv.axpy_v(vk, layer, cell(i), kv_head, e, chunk_o);
    }
    const float f = std::exp(m - big);
    denom += f * l;
    for (int j = 0; j < dh; ++j) out[j] += f * chunk_o[j];
  }
  for (int j = 0; j < dh; ++j) out[j] /= denom;
}

void attend_group(const KvCells& kv, int layer, int kv_head, const float* const* q, int G, const int32_t* cells,
                  int64_t n, float* scores, float* chunk_o, float* const* out) {
  const int dh = kv.head_dim();
  const float sqrt_dh = std::sqrt(static_cast<float>(dh));
  for (int g = 0; g < G; ++g) std::memset(out[g], 0, sizeof(float) * static_cast<std::size_t>(dh));
  if (n <= 0) return;
  const VecKernels& vk = vec_kernels();
  auto cell = [cells](int64_t i) -> int64_t { return cells ? cells[i] : i; };
  // Scores head-major: scores[g·n + i]; the same arithmetic per head as attend_head.
  float dot[kMaxHeadGroup], big[kMaxHeadGroup], denom[kMaxHeadGroup], m[kMaxHeadGroup], l[kMaxHeadGroup],
      e[kMaxHeadGroup];
  float* co[kMaxHeadGroup];
  for (int64_t i = 0; i < n; ++i) {
    kv.dot_k_multi(vk, layer, cell(i), kv_head, q, G, dot);
    for (int g = 0; g < G; ++g) scores[g * n + i] = dot[g] / sqrt_dh;
  }
  for (int g = 0; g < G; ++g) {
    big[g] = -INFINITY;
    for (int64_t i = 0; i < n; ++i) big[g] = std::max(big[g], scores[g * n + i]);
    denom[g] = 0.0f;
    co[g] = chunk_o + static_cast<std::size_t>(g) * dh;
  }
  for (int64_t c0 = 0; c0 < n; c0 += kSoftmaxChunk) {
    const int64_t c1 = std::min(n, c0 + kSoftmaxChunk);
    for (int g = 0; g < G; ++g) {
      m[g] = -INFINITY;
      for (int64_t i = c0; i < c1; ++i) m[g] = std::max(m[g], scores[g * n + i]);
      std::memset(co[g], 0, sizeof(float) * static_cast<std::size_t>(dh));
      l[g] = 0.0f;
    }
    for (int64_t i = c0; i < c1; ++i) {
      for (int g = 0; g < G; ++g) {
        e[g] = std::exp(scores[g * n + i] - m[g]);
        l[g] += e[g];
      }
      kv.axpy_v_multi(vk, layer, cell(i), kv_head, e, G, co);
    }
    for (int g = 0; g < G; ++g) {
      const float f = std::exp(m[g] - big[g]);
      denom[g] += f * l[g];
      for (int j = 0; j < dh; ++j) out[g][j] += f * co[g][j];
    }
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < dh; ++j) out[g][j] /= denom[g];
}

}  // namespace strata::engine
