#pragma once
// Norms of the residual path: the RMSNorm of rows (weighted, or unweighted as the hyper-connection's
// rms of the flattened streams) and the hyper-connection coefficients + collapse (docs/gguf.md §2,
// the same formulas as cpp/strata/engine/ops.cpp and hyper_connections.cpp).
#include "metal/kernels/common.h"

// One threadgroup per row: out = x · 1/sqrt(Σx²/n + eps) (· w). The sum of squares has a fixed order:
// thread t sums elements t, t+T, ... in order, SIMD groups reduce with simd_sum, and thread 0 adds the
// group partials in order. tmp: n_sg + 1 floats. out may alias x.
inline void rms_rows_body(constant RmsArgs& a, device const float* x, device const float* w, device float* out,
                          TGP(float) tmp, KPos p) {
  const uint row = p.tg_x;
  device const float* xr = x + ulong(row) * a.in_stride;
  device float* orow = out + ulong(row) * a.out_stride;
  float part = 0.0f;
  for (uint i = p.tid; i < a.n; i += p.tg_size) part += xr[i] * xr[i];
  const float sg_sum = simd_sum(part);
  if (p.lane == 0) tmp[p.sg] = sg_sum;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (p.tid == 0) {
    float s = 0.0f;
    for (uint g = 0; g < p.n_sg; ++g) s += tmp[g];
    tmp[p.n_sg] = s;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const float mean = float(tmp[p.n_sg]) / float(a.n);
  const float r = 1.0f / metal::sqrt(mean + a.eps);
  if (a.has_weight != 0) {
    for (uint i = p.tid; i < a.n; i += p.tg_size) orow[i] = (xr[i] * r) * w[i];
  } else {
    for (uint i = p.tid; i < a.n; i += p.tg_size) orow[i] = xr[i] * r;
  }
}

enum : uint { kHcMaxStreams = 16 };

// One threadgroup per row. Thread 0 turns the row's mix logits into pre/post/comb (head: pre only)
// exactly as hc_coefficients / hc_head_pre; then every thread collapses its elements:
// out[i] = Σ_s pre_s·X_s[i] (s ascending). pre_tg: n floats of threadgroup memory.
// mix: [row][(2+n)·n] (head: [row][n]); X: [row][n][d]; post: [row][n]; comb: [row][n][n].
inline void hc_collapse_body(constant HcArgs& a, device const float* mix, device const float* scale,
                             device const float* base, device const float* X, device float* post, device float* comb,
                             device float* out, TGP(float) pre_tg, KPos p) {
  const uint row = p.tg_x, n = a.n;
  if (p.tid == 0) {
    const uint nmix = a.head != 0 ? n : (2 + n) * n;
    device const float* m = mix + ulong(row) * nmix;
    for (uint s = 0; s < n; ++s) pre_tg[s] = sigmoid_f(m[s] * scale[0] + base[s]) + a.eps;
    if (a.head == 0) {
      device float* po = post + row * n;
      device float* c = comb + ulong(row) * n * n;
      for (uint s = 0; s < n; ++s) po[s] = 2.0f * sigmoid_f(m[n + s] * scale[1] + base[n + s]);
      const uint o = 2 * n;
      float cm[kHcMaxStreams * kHcMaxStreams];
      for (uint j = 0; j < n; ++j) {
        // softmax of the row (max, exp, sum in order, times the inverse), then + eps
        float mx = 0.0f;
        for (uint k = 0; k < n; ++k) {
          const float v = m[o + j * n + k] * scale[2] + base[o + j * n + k];
          cm[j * n + k] = v;
          mx = k == 0 ? v : (v > mx ? v : mx);
        }
        float sum = 0.0f;
        for (uint k = 0; k < n; ++k) {
          cm[j * n + k] = metal::exp(cm[j * n + k] - mx);
          sum += cm[j * n + k];
        }
        const float inv = 1.0f / sum;
        for (uint k = 0; k < n; ++k) cm[j * n + k] *= inv;
        for (uint k = 0; k < n; ++k) cm[j * n + k] += a.eps;
      }
      // columns, then (iters - 1) × (rows, columns), each divided by (sum + eps); columns at least once
      const uint iters = a.sinkhorn_iters > 0 ? a.sinkhorn_iters : 1u;
      for (uint it = 0; it < iters; ++it) {
        if (it > 0) {
          for (uint j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (uint k = 0; k < n; ++k) sum += cm[j * n + k];
            const float den = sum + a.eps;
            for (uint k = 0; k < n; ++k) cm[j * n + k] /= den;
          }
        }
        for (uint k = 0; k < n; ++k) {
          float sum = 0.0f;
          for (uint j = 0; j < n; ++j) sum += cm[j * n + k];
          const float den = sum + a.eps;
          for (uint j = 0; j < n; ++j) cm[j * n + k] /= den;
        }
      }
      for (uint q = 0; q < n * n; ++q) c[q] = cm[q];
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device const float* xr = X + ulong(row) * n * a.d;
  device float* orow = out + ulong(row) * a.d;
  float pre[kHcMaxStreams];
  for (uint s = 0; s < n; ++s) pre[s] = pre_tg[s];
  for (uint i = p.tid; i < a.d; i += p.tg_size) {
    float acc = pre[0] * xr[i];
    for (uint s = 1; s < n; ++s) acc += pre[s] * xr[ulong(s) * a.d + i];
    orow[i] = acc;
  }
}
