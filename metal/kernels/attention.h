#pragma once
// QSA attention on the GPU (docs/gguf.md §2), in the arithmetic order of the CPU engine
// (cpp/strata/engine/attention*.cpp, kv_quant.cpp, rope.cpp, ops.cpp):
//   qsa_prep     per row and head vector: RMSNorm (8 interleaved partial sums, fixed tree), NEOX RoPE
//                with the host's cos/sin table, and for K/V the int8 write (fp16 scale per 64,
//                round half to even, clamp ±127). Function constant kv_only: catch-up rows write
//                K/V and skip the queries (R-8's drafter catch-up, prompt rows without logits).
//   attn_chunks  split path, per (row, head, chunk of 64 list entries): scores s = (q·k̂)/sqrt(Dh)
//                (block dots of kv_dot), m = max, e = exp_cpu(s − m), l = Σe in list order,
//                o_j = Σ (e·s_b)·v_j in list order -> partial planes [chunk][plane row][head].
//   attn_merge   per (row, head): M = max m_c, denom = Σ_c e^{m_c−M}·l_c, out = Σ_c e^{m_c−M}·o_c / denom
//                (chunks in order), times σ(gate), written as [row][Hq·Dh] for the output GEMV.
//   attn_fused   the drafter's path: one threadgroup per (row, KV group) does all heads of the
//                group and every chunk of a list of up to 384 cells, merging in threadgroup memory —
//                the same operations on the same values in the same order as split + merge, so the
//                bytes are identical (tests/cpp/test_metal_attention.cpp).
// K/V layout (per layer), by cell format (the template parameter Kv of the bodies; the entry points
// `strata_<kernel>` take KvI8, `strata_<kernel>_f32` KvF32):
//   KvI8  (strata)   k/v [cell][Hkv][Dh] int8, ks/vs [cell][Hkv][ceil(Dh/64)] fp16 bits;
//   KvF32 (qwen3moe) k/v [cell][Hkv][Dh] float, ks/vs unused — the CPU's f32 cells: q·k with 8
//                    interleaved fused multiply-add sums and the fixed tree (dot_f32_fused),
//                    o_j = fma(e, v_j, o_j) (axpy_f32_fused).
#include "metal/kernels/common.h"

enum : uint { kAttnChunk = 64, kKvBlock = 64, kFusedMaxWidth = 384, kFusedThreads = 256 };

// Σ x_i² over n values in the CPU's order: lane l < 8 of the SIMD group sums i ≡ l (mod 8) in order,
// then ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)) through an xor butterfly; every lane gets the result.
inline float sumsq_cpu_order(device const float* x, uint n, uint lane) {
  float a = 0.0f;
  if (lane < 8)
    for (uint i = lane; i < n; i += 8) a = a + x[i] * x[i];
  a = a + simd_shuffle_xor(a, ushort(1));
  a = a + simd_shuffle_xor(a, ushort(2));
  a = a + simd_shuffle_xor(a, ushort(4));
  return simd_broadcast(a, ushort(0));
}

// q · k̂ of one cell (kv_dot): per 64-block 8 interleaved partial sums and the fixed tree, times the
// block's scale, blocks added in order.
inline float kv_dot_cell(device const float* q, device const int8_t* k8, device const ushort* ks, uint dh) {
  float total = 0.0f;
  for (uint b0 = 0, b = 0; b0 < dh; b0 += kKvBlock, ++b) {
    const uint len = metal::min(dh - b0, uint(kKvBlock));
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    uint i = 0;
    for (; i + 8 <= len; i += 8)
      for (uint l = 0; l < 8; ++l) acc[l] = acc[l] + q[b0 + i + l] * float(int(k8[b0 + i + l]));
    for (uint l = 0; i < len; ++i, ++l) acc[l] = acc[l] + q[b0 + i] * float(int(k8[b0 + i]));
    const float d = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    total += d * half_bits_to_float(ks[b]);
  }
  return total;
}

// The two K/V cell formats. `slot` = cell·Hkv + KV head; buffers come in as bytes.
struct KvI8 {
  static inline float dot(device const float* q, device const uchar* k, device const ushort* ks, ulong slot, uint dh,
                          uint nb) {
    return kv_dot_cell(q, (device const int8_t*)k + slot * dh, ks + slot * nb, dh);
  }
  // acc + e·v̂_j as the CPU's kv_axpy forms it: acc + (e·scale)·code.
  static inline float v_add(float acc, float e, device const uchar* v, device const ushort* vs, ulong slot, uint j,
                            uint dh, uint nb) {
    return acc + (e * half_bits_to_float(vs[slot * nb + j / kKvBlock])) *
                     float(int(((device const int8_t*)v)[slot * dh + j]));
  }
  // One head vector (lane owns elements lane + 32·j, j < 8): int8 per 64-element block (fp16 scale
  // absmax/127, round half to even, clamp ±127). Every lane of the SIMD group calls it.
  static inline void store(thread const float* x, device uchar* dst, device ushort* sc, ulong slot, uint dh, uint nb,
                           uint lane) {
    device int8_t* q8 = (device int8_t*)dst + slot * dh;
    device ushort* s16p = sc + slot * nb;
    for (uint b = 0; b < nb; ++b) {
      const float m0 = metal::fabs(x[2 * b]);
      const float m1 = 2 * b + 1 < 8 ? metal::fabs(x[2 * b + 1]) : 0.0f;
      const float amax = simd_max(m0 > m1 ? m0 : m1);
      const half s16 = half(amax / 127.0f);
      const float s = float(s16);
      if (lane == 0) s16p[b] = as_type<ushort>(s16);
      for (uint j = 2 * b; j < 2 * b + 2 && j < 8; ++j) {
        const uint i = lane + 32 * j;
        if (i >= dh) continue;
        const float q = s == 0.0f ? 0.0f : metal::clamp(metal::rint(x[j] / s), -127.0f, 127.0f);
        q8[i] = int8_t(int(q));
      }
    }
  }
};

struct KvF32 {
  static inline float dot(device const float* q, device const uchar* k, device const ushort*, ulong slot, uint dh,
                          uint) {
    device const float* kf = (device const float*)k + slot * dh;
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    uint i = 0;
    for (; i + 8 <= dh; i += 8)
      for (uint l = 0; l < 8; ++l) acc[l] = metal::fma(q[i + l], kf[i + l], acc[l]);
    for (uint l = 0; i < dh; ++i, ++l) acc[l] = metal::fma(q[i], kf[i], acc[l]);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }
  // fma(e, v_j, acc): the CPU's axpy_f32_fused.
  static inline float v_add(float acc, float e, device const uchar* v, device const ushort*, ulong slot, uint j,
                            uint dh, uint) {
    return metal::fma(e, ((device const float*)v)[slot * dh + j], acc);
  }
  static inline void store(thread const float* x, device uchar* dst, device ushort*, ulong slot, uint dh, uint,
                           uint lane) {
    device float* o = (device float*)dst + slot * dh;
    for (uint j = 0; j < 8; ++j) {
      const uint i = lane + 32 * j;
      if (i < dh) o[i] = x[j];
    }
  }
};

inline uint cell_of(constant AttnArgs& a, device const int* cells, uint row, uint i) {
  return a.implicit_list != 0 ? i : uint(cells[row * a.list_stride + i]);
}

// ---- qsa_prep: grid (2·Hkv [+ Hq], n_rows), one SIMD group (32 threads) per head vector.
// Slots: [0, Hkv) K heads, [Hkv, 2·Hkv) V heads, [2·Hkv, 2·Hkv + Hq) query heads.
template <class Kv>
inline void qsa_prep_body(constant QsaPrepArgs& a, device const float* qp, device const float* kp,
                          device const float* vp, device const float* q_norm, device const float* k_norm,
                          device const float* cs, device float* qh, device uchar* k8, device ushort* ks,
                          device uchar* v8, device ushort* vs, bool kv_only, KPos p) {
  const uint slot = p.tg_x, row = p.tg_y, lane = p.lane;
  const uint dh = a.head_dim, hkv = a.n_head_kv;
  const bool is_k = slot < hkv, is_v = slot >= hkv && slot < 2 * hkv;
  if (!is_k && !is_v && kv_only) return;  // the whole group: no barrier in this kernel
  device const float* src;
  device const float* w = k_norm;
  if (is_k) {
    src = kp + ulong(row) * a.kv_stride + (slot)*dh;
  } else if (is_v) {
    src = vp + ulong(row) * a.kv_stride + (slot - hkv) * dh;
  } else {
    const uint h = slot - 2 * hkv;
    src = qp + ulong(row) * a.q_stride + (a.gated != 0 ? 2 * h * dh : h * dh);
    w = q_norm;
  }
  // Norm (K and Q) and RoPE into registers: lane owns elements lane, lane + 32, ... (<= 8 per lane).
  float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const uint per = (dh + 31) / 32;
  if (is_v) {
    for (uint j = 0; j < per; ++j) {
      const uint i = lane + 32 * j;
      v[j] = i < dh ? src[i] : 0.0f;
    }
  } else {
    const float ss = sumsq_cpu_order(src, dh, lane);
    const float r = 1.0f / metal::sqrt(ss / float(dh) + a.eps);
    const uint half_rd = a.rope_dim / 2;
    device const float* c = cs + ulong(row) * a.cs_stride;
    for (uint j = 0; j < per; ++j) {
      const uint i = lane + 32 * j;
      float x = 0.0f;
      if (i < dh) x = (src[i] * r) * w[i];
      if (i < a.rope_dim) {
        // NEOX pairs (i, i + r/2): rotate with both normed values (Rope::apply).
        const bool lo = i < half_rd;
        const uint k = lo ? i : i - half_rd;
        const uint o = lo ? i + half_rd : i - half_rd;
        const float other = (src[o] * r) * w[o];
        const float cc = c[k], sn = c[half_rd + k];
        x = lo ? x * cc - other * sn : x * cc + other * sn;
      }
      v[j] = x;
    }
  }
  if (!is_k && !is_v) {
    device float* out = qh + (ulong(row) * a.n_head + (slot - 2 * hkv)) * dh;
    for (uint j = 0; j < per; ++j) {
      const uint i = lane + 32 * j;
      if (i < dh) out[i] = v[j];
    }
    return;
  }
  // The cell write in the layer's format.
  const ulong cell = a.cell0 + row;
  const uint g = is_k ? slot : slot - hkv;
  Kv::store(v, is_k ? k8 : v8, is_k ? ks : vs, cell * hkv + g, dh, a.kv_blocks, lane);
}

// ---- attn_chunks: grid (n_chunks, Hq, n_rows), 64 threads. tg_e: 64 floats; tg_m: 2 floats.
// part_o: [chunk][plane row][Hq][Dh]; part_ml: [chunk][plane row][Hq][2] (m, l).
template <class Kv>
inline void attn_chunks_body(constant AttnArgs& a, device const float* qh, device const uchar* k8,
                             device const ushort* ks, device const uchar* v8, device const ushort* vs,
                             device const int* cells, device const int* n_cells, device float* part_o,
                             device float* part_ml, TGP(float) tg_e, TGP(float) tg_m, KPos p) {
  const uint chunk = p.tg_x, h = p.tg_y, row = p.tg_z, t = p.tid;
  const uint dh = a.head_dim, hkv = a.n_head_kv, g = h / (a.n_head / hkv);
  const uint n = uint(n_cells[row]);
  const uint c0 = chunk * kAttnChunk;
  if (c0 >= n) return;  // the whole group: this chunk is past the row's list
  const uint len = metal::min(n - c0, uint(kAttnChunk));
  device const float* q = qh + (ulong(row) * a.n_head + h) * dh;
  float s = -INFINITY;
  if (t < len) {
    const ulong c = cell_of(a, cells, row, c0 + t);
    s = Kv::dot(q, k8, ks, c * hkv + g, dh, a.kv_blocks) / a.sqrt_dh;
  }
  const float sg_max = simd_max(s);
  if (p.lane == 0) tg_m[p.sg] = sg_max;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const float m = metal::max(float(tg_m[0]), float(tg_m[1]));
  const float e = t < len ? exp_cpu(s - m) : 0.0f;
  tg_e[t] = e;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const ulong part = (ulong(chunk) * a.plane_stride + row) * a.n_head + h;
  if (t == 0) {
    float l = 0.0f;
    for (uint i = 0; i < len; ++i) l += tg_e[i];
    part_ml[part * 2] = m;
    part_ml[part * 2 + 1] = l;
  }
  device float* o = part_o + part * dh;
  for (uint j = t; j < dh; j += p.tg_size) {
    float acc = 0.0f;
    for (uint i = 0; i < len; ++i) {
      const ulong c = cell_of(a, cells, row, c0 + i);
      acc = Kv::v_add(acc, float(tg_e[i]), v8, vs, c * hkv + g, j, dh, a.kv_blocks);
    }
    o[j] = acc;
  }
}

// ---- attn_merge: grid (Hq, n_rows), T threads over Dh.
inline void attn_merge_body(constant AttnArgs& a, device const float* part_o, device const float* part_ml,
                            device const int* n_cells, device const float* gates, device float* out, KPos p) {
  const uint h = p.tg_x, row = p.tg_y, dh = a.head_dim;
  const uint n = uint(n_cells[row]);
  const uint nc = (n + kAttnChunk - 1) / kAttnChunk;
  float M = -INFINITY;
  for (uint c = 0; c < nc; ++c) M = metal::max(M, part_ml[((ulong(c) * a.plane_stride + row) * a.n_head + h) * 2]);
  float denom = 0.0f;
  for (uint c = 0; c < nc; ++c) {
    const ulong part = (ulong(c) * a.plane_stride + row) * a.n_head + h;
    denom += exp_cpu(part_ml[part * 2] - M) * part_ml[part * 2 + 1];
  }
  device float* o = out + ulong(row) * a.out_stride + h * dh;
  device const float* gate = gates + ulong(row) * a.gate_stride + 2 * h * dh + dh;
  for (uint j = p.tid; j < dh; j += p.tg_size) {
    float acc = 0.0f;
    for (uint c = 0; c < nc; ++c) {
      const ulong part = (ulong(c) * a.plane_stride + row) * a.n_head + h;
      acc += exp_cpu(part_ml[part * 2] - M) * part_o[part * dh + j];
    }
    float r = nc == 0 ? 0.0f : acc / denom;
    if (a.gated != 0) r *= sigmoid_f(gate[j]);
    o[j] = r;
  }
}

// ---- attn_fused: grid (Hkv, n_rows), kFusedThreads threads. tg_s: G·W floats (scores, then e);
// tg_ml: G·nchunks·2 floats. Requires W = n_cells[row] <= 384 and the threadgroup memory to fit.
template <class Kv>
inline void attn_fused_body(constant AttnArgs& a, device const float* qh, device const uchar* k8,
                            device const ushort* ks, device const uchar* v8, device const ushort* vs,
                            device const int* cells, device const int* n_cells, device const float* gates,
                            device float* out, TGP(float) tg_s, TGP(float) tg_ml, KPos p) {
  const uint g = p.tg_x, row = p.tg_y, T = p.tg_size;
  const uint dh = a.head_dim, hkv = a.n_head_kv, G = a.n_head / hkv;
  const uint W = uint(n_cells[row]);
  const uint nc = (W + kAttnChunk - 1) / kAttnChunk;
  // Phase 1: every score of the group's heads over the list.
  for (uint q = p.tid; q < G * W; q += T) {
    const uint hl = q / W, i = q % W;
    const uint h = g * G + hl;
    const ulong c = cell_of(a, cells, row, i);
    tg_s[q] = Kv::dot(qh + (ulong(row) * a.n_head + h) * dh, k8, ks, c * hkv + g, dh, a.kv_blocks) / a.sqrt_dh;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // Phase 2: per (head, chunk): m, e = exp(s − m) in place, l in list order.
  for (uint q = p.tid; q < G * nc; q += T) {
    const uint hl = q / nc, c = q % nc;
    const uint i0 = c * kAttnChunk, i1 = metal::min(W, i0 + kAttnChunk);
    TGP(float) s = tg_s + hl * W;
    float m = -INFINITY;
    for (uint i = i0; i < i1; ++i) m = metal::max(m, float(s[i]));
    float l = 0.0f;
    for (uint i = i0; i < i1; ++i) {
      const float e = exp_cpu(s[i] - m);
      s[i] = e;
      l += e;
    }
    tg_ml[q * 2] = m;
    tg_ml[q * 2 + 1] = l;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // Phase 3: per (head, element): chunk outputs built and merged max-first, chunks in order.
  for (uint q = p.tid; q < G * dh; q += T) {
    const uint hl = q / dh, j = q % dh, h = g * G + hl;
    float M = -INFINITY;
    for (uint c = 0; c < nc; ++c) M = metal::max(M, float(tg_ml[(hl * nc + c) * 2]));
    float denom = 0.0f;
    for (uint c = 0; c < nc; ++c) denom += exp_cpu(tg_ml[(hl * nc + c) * 2] - M) * tg_ml[(hl * nc + c) * 2 + 1];
    float acc = 0.0f;
    for (uint c = 0; c < nc; ++c) {
      const uint i0 = c * kAttnChunk, i1 = metal::min(W, i0 + kAttnChunk);
      float oc = 0.0f;
      for (uint i = i0; i < i1; ++i) {
        oc = Kv::v_add(oc, float(tg_s[hl * W + i]), v8, vs, ulong(cell_of(a, cells, row, i)) * hkv + g, j, dh,
                       a.kv_blocks);
      }
      acc += exp_cpu(tg_ml[(hl * nc + c) * 2] - M) * oc;
    }
    float r = nc == 0 ? 0.0f : acc / denom;
    if (a.gated != 0) r *= sigmoid_f(gates[ulong(row) * a.gate_stride + 2 * h * dh + dh + j]);
    out[ulong(row) * a.out_stride + h * dh + j] = r;
  }
}
