#pragma once
// The MoE's expert products through the plan (plan.h), and the element-wise steps around them.
//   moe_gemv   one GEMV per plan group (expert), llama.cpp's mul_mv_id in spirit: threadgroup
//              (row tile, group g) multiplies the rows of expert group_expert[g] with the
//              activations of the group's slots, K slots per pass; an entry's activation row is its
//              token (entry / k) for gate/up or the entry itself for down; outputs land at the
//              entry's row, so the routed outputs come out [row][rank][d] as the combine reads them.
//              Per (row, entry) the order of the sum is gemv_body's: a plan never changes the bits.
//   elementwise  swiglu, sigmoid, broadcast add/copy (op codes below).
#include "metal/kernels/gemv.h"

// grid: (ceil(rows / (S·(32/L)·R)), max groups); 32·S threads. GemvArgs: rows/cols/row_bytes of one
// expert, expert_bytes between experts, x_stride/y_stride per entry row, k = entries per token when
// the activations are per token (0: per entry).
template <class F>
inline void moe_gemv_body(constant GemvArgs& a, device const uchar* W, device const float* X, device float* Y,
                          device const PlanHeader* hdr, device const int* group_expert, device const int* group_offset,
                          device const int* slot_entry, uint L, uint R, uint K, KPos p) {
  const uint g = p.tg_y;
  if (g >= hdr->n_groups) return;  // the whole threadgroup
  const uint expert = uint(group_expert[g]);
  const uint s_begin = uint(group_offset[g]), s_end = uint(group_offset[g + 1]);
  device const uchar* We = W + ulong(expert) * a.expert_bytes;
  const uint groups_per_sg = 32u / L;
  const uint lg = p.lane / L, li = p.lane % L;
  const uint row0 = ((p.tg_x * p.n_sg + p.sg) * groups_per_sg + lg) * R;
  const uint n_units = (a.cols + F::kUnit - 1) / F::kUnit;
  float w[kGemvMaxUnit];
  for (uint s0 = s_begin; s0 < s_end; s0 += K) {
    float acc[kGemvMaxAcc];
    for (uint q = 0; q < kGemvMaxAcc; ++q) acc[q] = 0.0f;
    for (uint u = li; u < n_units; u += L) {
      for (uint r = 0; r < R; ++r) {
        const uint row = row0 + r;
        if (row >= a.rows) break;
        F::decode(We + ulong(row) * a.row_bytes, u, a.cols, w);
        for (uint k = 0; k < K; ++k) {
          if (s0 + k >= s_end) break;
          const uint e = uint(slot_entry[s0 + k]);
          const uint xr = a.k != 0 ? e / a.k : e;
          device const float* x = X + ulong(xr) * a.x_stride + u * F::kUnit;
          const uint n = metal::min(uint(F::kUnit), a.cols - u * F::kUnit);
          float s = 0.0f;
          for (uint i = 0; i < n; ++i) s += w[i] * x[i];
          acc[r * K + k] += s;
        }
      }
    }
    for (uint r = 0; r < R; ++r)
      for (uint k = 0; k < K; ++k) {
        float v = acc[r * K + k];
        for (uint off = L / 2; off >= 1; off /= 2) v += simd_shuffle_xor(v, ushort(off));
        const uint row = row0 + r;
        if (li == 0 && row < a.rows && s0 + k < s_end) Y[ulong(slot_entry[s0 + k]) * a.y_stride + row] = v;
      }
  }
}

enum : uint { kEwSwiglu = 0, kEwSigmoid = 1, kEwAddBroadcast = 2, kEwCopyBroadcast = 3 };

// out[i] for i < n, one element per thread:
//   swiglu          silu(a[i]) · b[i]                    (ops.cpp: silu(x) = x / (1 + e^-x))
//   sigmoid         1 / (1 + e^-a[i])
//   add_broadcast   a[(i / group)·inner + i % inner] + b[i]   (MTP: e + fc_hidden(h_s) per stream)
//   copy_broadcast  a[(i / group)·inner + i % inner]          (the embedding into every stream)
inline void elementwise_body(constant EwArgs& a, device const float* x, device const float* y, device float* out,
                             KPos p) {
  const uint i = p.tg_x * p.tg_size + p.tid;
  if (i >= a.n) return;
  if (a.op == kEwSwiglu) {
    out[i] = silu_f(x[i]) * y[i];
  } else if (a.op == kEwSigmoid) {
    out[i] = sigmoid_f(x[i]);
  } else {
    const float v = x[(i / a.group) * a.inner + i % a.inner];
    out[i] = a.op == kEwAddBroadcast ? v + y[i] : v;
  }
}
