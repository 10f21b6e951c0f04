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

// e^x in the CPU engine's arithmetic (cpp/strata/engine/vec_dot.h exp_f32: Cephes' degree-6 polynomial
// on [−ln2/2, ln2/2] times 2^n, each multiply and add rounded separately; 0 below −87, +∞ above 88):
// the attention's softmax uses it on both sides, so the emulated kernels give the CPU's bytes and the
// CPU computes it in SIMD lanes (tests/cpp/test_metal_emulator.cpp checks the two agree bit for bit).
inline float exp_cpu(float x) {
  if (x != x) return x;
  if (x < -87.0f) return 0.0f;
  if (x > 88.0f) return INFINITY;
  const float fx = metal::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r;
  y = y + 1.0f;
  return y * as_type<float>(uint(int(fx) + 127) << 23);
}

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
