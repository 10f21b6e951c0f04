#pragma once
// Manifold-constrained hyper-connections (docs/gguf.md §2, transformers' DeepseekV4HyperConnection
// and DeepseekV4HyperHead) on one row: the coefficients from the mix logits, the collapse of the n
// streams, and the HyperHead's pre weights. The expand step lives in hc_combine.h.
#include <cstdint>

namespace strata::engine {

// From mix = fn @ rms(flat) ((2+n)·n values), scale [3] and base [(2+n)·n]:
//   pre  = σ(mix[0:n]·scale[0] + base[0:n]) + eps
//   post = 2σ(mix[n:2n]·scale[1] + base[n:2n])
//   comb = softmax_row(mix[2n:]·scale[2] + base[2n:]) + eps, then columns, then
//          (iters - 1) × (rows, columns), each divided by (sum + eps).
// comb is row-major [j][k]: stream j's weight in output stream k.
void hc_coefficients(const float* mix, const float* scale, const float* base, int n, int sinkhorn_iters, float eps,
                     float* pre, float* post, float* comb);

// HyperHead: pre = σ(mix·scale[0] + base) + eps, mix = hc_fn @ rms(flat) (n values).
void hc_head_pre(const float* mix, const float* scale, const float* base, int n, float eps, float* pre);

// out[i] = Σ_s pre[s]·X[s·d + i]  (s ascending).
void hc_collapse(const float* X, int n, int64_t d, const float* pre, float* out);

}  // namespace strata::engine
