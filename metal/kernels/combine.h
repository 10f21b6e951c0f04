#pragma once
// The hyper-connection combine of SPEC §2.3 on the GPU, element for element the arithmetic of
// cpp/strata/engine/hc_combine.cpp: y = Σ_k w_k·routed_k (k ascending, from 0) + g·shared, then for
// each output stream s: post_s·y followed by the comb[j][s]·X_j terms in ascending j. Every stream
// element is read before any is written (x_out may alias x_in). Each thread owns whole elements, so
// the result never depends on the grid.
//   generic: any d and n <= 64; one element per thread; grid (ceil(d / T), n_tok).
//   fast:    d = 2560, n = 4 (compile-time); four elements per thread as float4; grid (ceil(640 / T), n_tok).
// The two are bitwise equal (the same operations per element, no contraction; tests/cpp/test_metal_combine.cpp).
#include "metal/kernels/common.h"

enum : uint { kCombineMaxStreams = 64, kCombineFastD = 2560, kCombineFastN = 4 };

inline void combine_generic_body(constant CombineArgs& a, device const float* routed, device const float* weights,
                                 device const float* shared, device const float* shared_gate, device const float* post,
                                 device const float* comb, device const float* x_in, device float* x_out, KPos p) {
  const uint i = p.tg_x * p.tg_size + p.tid, t = p.tg_y;
  if (i >= a.d) return;
  const uint d = a.d, n = a.n, K = a.k;
  float y = 0.0f;
  for (uint kk = 0; kk < K; ++kk) y += weights[t * K + kk] * routed[(ulong(t) * K + kk) * d + i];
  if (a.has_shared != 0) y += shared_gate[t] * shared[ulong(t) * d + i];
  float x[kCombineMaxStreams];
  for (uint j = 0; j < n; ++j) x[j] = x_in[(ulong(t) * n + j) * d + i];
  for (uint s = 0; s < n; ++s) {
    float acc = post[t * n + s] * y;
    for (uint j = 0; j < n; ++j) acc += comb[(t * n + j) * n + s] * x[j];
    x_out[(ulong(t) * n + s) * d + i] = acc;
  }
}

template <uint N, uint D>
inline void combine_fast_body(constant CombineArgs& a, device const float* routed, device const float* weights,
                              device const float* shared, device const float* shared_gate, device const float* post,
                              device const float* comb, device const float* x_in, device float* x_out, KPos p) {
  const uint q = p.tg_x * p.tg_size + p.tid, t = p.tg_y;
  if (q >= D / 4) return;
  const uint i = q * 4, K = a.k;
  float4 y = float4(0.0f);
  for (uint kk = 0; kk < K; ++kk) y += weights[t * K + kk] * load4(routed + (ulong(t) * K + kk) * D + i);
  if (a.has_shared != 0) y += shared_gate[t] * load4(shared + ulong(t) * D + i);
  float4 x[N];
  for (uint j = 0; j < N; ++j) x[j] = load4(x_in + (ulong(t) * N + j) * D + i);
  for (uint s = 0; s < N; ++s) {
    float4 acc = post[t * N + s] * y;
    for (uint j = 0; j < N; ++j) acc += comb[(t * N + j) * N + s] * x[j];
    store4(x_out + (ulong(t) * N + s) * D + i, acc);
  }
}
