#pragma once
// Small numeric building blocks of the forward pass (docs/gguf.md §2), all float32, each with a
// fixed reduction order so that a row's result never depends on which other rows share a batch
// or which thread computes it.
#include <cstdint>

namespace strata::engine {

// Sum of x[i]^2 in a fixed order (8 interleaved partial sums, then added in lane order).
float sum_squares(const float* x, int64_t n);

// out = x * rsqrt(mean(x^2) + eps) * w  (w may be nullptr: unweighted rms). out may alias x.
void rms_norm(const float* x, int64_t n, float eps, const float* w, float* out);

float sigmoid(float x);
float silu(float x);

// In place: x = softmax(x) (max-subtracted, exp, sum in index order, divide).
void softmax(float* x, int64_t n);

// h[i] = silu(g[i]) * u[i]
void swiglu(const float* g, const float* u, float* h, int64_t n);
// deepseek4's clamped form: h[i] = silu(min(g[i], limit)) * clamp(u[i], -limit, limit); limit 0 = swiglu.
void swiglu_clamped(const float* g, const float* u, float* h, int64_t n, float limit);

}  // namespace strata::engine
