#pragma once
// Matrix-vector products over the block formats (quant_formats.h) with selectable tiles, and the row
// gather of the embedding table.
//
// Tile (L, R, S, K) — function constants of the pipeline (the drafter's wide class can be overridden
// with STRATA_METAL_MTP_TILE=L,R,S,K, see metal/host/tiles.h):
//   L  lanes that share one weight row (32, 16 or 8): a SIMD group works on 32/L rows at once;
//   R  rows per lane group (1, 2 or 4): the activation values a lane loads serve R rows;
//   S  SIMD groups per threadgroup (1, 2, 4 or 8);
//   K  activation rows per pass (1, 2, 4 or 8): each lane keeps R·K <= 16 accumulators, so the K
//      activation rows (e.g. the 4 hyper-connection streams of fc_hidden, R-10) share one read of W.
// Order of a result y[a][r]: lane l of the row's lane group takes units l, l + L, l + 2L, ... in
// order; per unit it adds Σ_i w_i·x_i (i ascending, w decoded exactly as ggml) to its accumulator;
// the L lane partials are added by an xor butterfly (offsets L/2, ..., 1). Nothing in that order
// depends on K, R, S, on nx or on which other rows share a dispatch, so a batched GEMV row is bitwise
// the single-row GEMV (tests/cpp/test_metal_gemv.cpp) — as long as L is the same.
// Activations are float (not quantized as the CPU kernels do): the GPU result is the exact
// dequantized product up to float rounding.
#include "metal/kernels/quant_formats.h"

enum : uint { kGemvMaxR = 4, kGemvMaxK = 8, kGemvMaxAcc = 16, kGemvMaxUnit = 32 };

// grid: (ceil(rows / (S·(32/L)·R)), ceil(nx / K)); threadgroup: 32·S threads.
template <class F>
inline void gemv_body(constant GemvArgs& a, device const uchar* W, device const float* X, device float* Y, uint L,
                      uint R, uint K, KPos p) {
  const uint groups_per_sg = 32u / L;
  const uint lg = p.lane / L, li = p.lane % L;
  const uint row0 = ((p.tg_x * p.n_sg + p.sg) * groups_per_sg + lg) * R;
  const uint x0 = p.tg_y * K;
  const uint n_units = (a.cols + F::kUnit - 1) / F::kUnit;
  float acc[kGemvMaxAcc];
  for (uint q = 0; q < kGemvMaxAcc; ++q) acc[q] = 0.0f;
  float w[kGemvMaxUnit];
  for (uint u = li; u < n_units; u += L) {
    for (uint r = 0; r < R; ++r) {
      const uint row = row0 + r;
      if (row >= a.rows) break;
      F::decode(W + ulong(row) * a.row_bytes, u, a.cols, w);
      for (uint k = 0; k < K; ++k) {
        if (x0 + k >= a.nx) break;
        device const float* x = X + ulong(x0 + k) * a.x_stride + u * F::kUnit;
        const uint n = metal::min(uint(F::kUnit), a.cols - u * F::kUnit);
        float s = 0.0f;
        for (uint i = 0; i < n; ++i) s += w[i] * x[i];
        acc[r * K + k] += s;
      }
    }
  }
  // Every lane takes part in the butterfly, whether or not its rows exist.
  for (uint r = 0; r < R; ++r)
    for (uint k = 0; k < K; ++k) {
      float v = acc[r * K + k];
      for (uint off = L / 2; off >= 1; off /= 2) v += simd_shuffle_xor(v, ushort(off));
      const uint row = row0 + r;
      if (li == 0 && row < a.rows && x0 + k < a.nx) Y[ulong(x0 + k) * a.y_stride + row] = v;
    }
}

// out[i][:] = row ids[i] of W decoded (token embeddings). grid: (ceil(units / T), n_ids); T threads,
// one unit per thread.
template <class F>
inline void get_rows_body(constant GemvArgs& a, device const uchar* W, device const int* ids, device float* out,
                          KPos p) {
  const uint u = p.tg_x * p.tg_size + p.tid, i = p.tg_y;
  const uint n_units = (a.cols + F::kUnit - 1) / F::kUnit;
  if (u >= n_units) return;
  float w[kGemvMaxUnit];
  F::decode(W + ulong(ids[i]) * a.row_bytes, u, a.cols, w);
  const uint n = metal::min(uint(F::kUnit), a.cols - u * F::kUnit);
  device float* o = out + ulong(i) * a.y_stride + u * F::kUnit;
  for (uint e = 0; e < n; ++e) o[e] = w[e];
}
