#pragma once
// Helpers every kernel body may use (MSL ∩ C++).
#include "metal/kernels/args.h"
#include "metal/kernels/kpos.h"

// Vector loads and stores of four floats (16-byte aligned addresses).
inline float4 load4(device const float* p) {
#if defined(__METAL_VERSION__)
  return *((device const float4*)p);
#else
  return float4(p[0], p[1], p[2], p[3]);
#endif
}
inline void store4(device float* p, float4 v) {
#if defined(__METAL_VERSION__)
  *((device float4*)p) = v;
#else
  p[0] = v.x;
  p[1] = v.y;
  p[2] = v.z;
  p[3] = v.w;
#endif
}

inline float half_bits_to_float(ushort b) { return float(as_type<half>(b)); }
inline float bf16_bits_to_float(ushort b) { return as_type<float>(uint(b) << 16); }

inline float sigmoid_f(float x) { return 1.0f / (1.0f + metal::exp(-x)); }
inline float silu_f(float x) { return x / (1.0f + metal::exp(-x)); }

// Exclusive prefix sum of v over a threadgroup whose size is a multiple of 32, in thread order;
// `total` receives the sum over the group. tmp: n_sg + 1 uints of threadgroup memory. Every thread
// must call it (it has threadgroup barriers).
inline uint tg_exclusive_scan(uint v, TGP(uint) tmp, KPos p, thread uint& total) {
  const uint in_sg = simd_prefix_exclusive_sum(v);
  if (p.lane == 31) tmp[p.sg] = in_sg + v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (p.tid == 0) {
    uint acc = 0;
    for (uint s = 0; s < p.n_sg; ++s) {
      const uint t = tmp[s];
      tmp[s] = acc;
      acc += t;
    }
    tmp[p.n_sg] = acc;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const uint r = tmp[p.sg] + in_sg;
  total = tmp[p.n_sg];
  threadgroup_barrier(mem_flags::mem_threadgroup);  // tmp may be reused right after
  return r;
}
