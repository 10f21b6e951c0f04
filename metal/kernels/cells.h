#pragma once
// Which cells a row attends to (docs/gguf.md §2, cpp/strata/engine/cell_select.cpp) on the GPU:
// sinks [0, min(S, p+1)), the window (p−W, p], and with the lightning indexer the top-T of the cells
// between them by I(c) = Σ_j w_j·ReLU(qI_j·kI_c) (ties to the lower id, NaN lowest, all of them when
// there are at most T), as an ascending list. Positions are cell ids (one sequence).
//   indexer_scores  one thread per candidate cell, the dot in the CPU's order (8 interleaved sums,
//                   fixed tree) and the heads added in order: the CPU's bits.
//   select_cells    one threadgroup per row: T rounds of a threadgroup arg-max, each over the
//                   candidates that rank below the previous pick (no marks needed: the order is
//                   total), then the picks sorted by rank counting; the list written in parallel.
#include "metal/kernels/common.h"

enum : uint { kSelectMaxTopK = 1024 };

inline float dot_cpu_order(device const float* a, device const float* b, uint n) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  uint i = 0;
  for (; i + 8 <= n; i += 8)
    for (uint l = 0; l < 8; ++l) acc[l] = acc[l] + a[i + l] * b[i + l];
  for (uint l = 0; i < n; ++i, ++l) acc[l] = acc[l] + a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The candidate range [begin, end) of the row at position p.
inline void candidates_of(constant CellArgs& a, uint p, thread uint& begin, thread uint& end) {
  const uint sink_end = metal::min(a.sink, p + 1);
  const uint lo = p + 1 > a.window ? p + 1 - a.window : 0u;
  begin = sink_end;
  end = lo > sink_end ? lo : sink_end;
}

// grid: (ceil(max candidates / T), n_rows). ik: [cell][Di]; iq: [row][Hi·Di]; iw: [row][Hi].
inline void indexer_scores_body(constant CellArgs& a, device const float* iq, device const float* iw,
                                device const float* ik, device float* scores, KPos p) {
  const uint row = p.tg_y, i = p.tg_x * p.tg_size + p.tid;
  uint b, e;
  candidates_of(a, a.pos0 + row, b, e);
  if (i >= e - b) return;
  device const float* q = iq + ulong(row) * a.q_stride;
  device const float* w = iw + ulong(row) * a.w_stride;
  device const float* k = ik + ulong(b + i) * a.dim;
  float total = 0.0f;
  for (uint j = 0; j < a.heads; ++j) {
    const float d = dot_cpu_order(q + j * a.dim, k, a.dim);
    total += w[j] * (d > 0.0f ? d : 0.0f);
  }
  scores[ulong(row) * a.score_stride + i] = total;
}

inline bool rank_before(float sa, uint ia, float sb, uint ib) { return sa > sb || (sa == sb && ia < ib); }

// grid: (n_rows); T threads (a multiple of 32). picks: top_k uints; red: 2·n_sg + 2 words.
inline void select_cells_body(constant CellArgs& a, device const float* scores, device int* lists, device int* n_cells,
                              TGP(uint) picks, TGP(uint) red, KPos p) {
  const uint row = p.tg_x, pos = a.pos0 + row, T = p.tg_size;
  uint cb, ce;
  candidates_of(a, pos, cb, ce);
  const uint m = ce - cb;
  const uint lo = pos + 1 > a.window ? pos + 1 - a.window : 0u;
  const uint n_sinks = metal::min(cb, lo);
  device int* out = lists + ulong(row) * a.list_stride;
  device const float* sc = scores + ulong(row) * a.score_stride;
  const bool pick = a.use_scores != 0 && a.top_k > 0 && m > 0;
  const uint n_picks = pick ? metal::min(m, a.top_k) : 0u;
  if (pick && m > a.top_k) {
    float prev_s = INFINITY;
    uint prev_i = 0xFFFFFFFFu;  // (inf, none) ranks before everything
    for (uint t = 0; t < a.top_k; ++t) {
      float bs = -INFINITY;
      uint bi = 0xFFFFFFFFu;
      for (uint i = p.tid; i < m; i += T) {
        const float s0 = sc[i];
        const float s = metal::isnan(s0) ? -INFINITY : s0;
        const bool below_prev = prev_i == 0xFFFFFFFFu || rank_before(prev_s, prev_i, s, i);
        if (below_prev && (bi == 0xFFFFFFFFu || rank_before(s, i, bs, bi))) {
          bs = s;
          bi = i;
        }
      }
      // SIMD group: the best score, then the lowest index holding it.
      const float gs = simd_max(bi == 0xFFFFFFFFu ? -INFINITY : bs);
      const uint gi = simd_min((bi != 0xFFFFFFFFu && bs == gs) ? bi : 0xFFFFFFFFu);
      if (p.lane == 0) {
        red[2 * p.sg] = as_type<uint>(gs);
        red[2 * p.sg + 1] = gi;
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      if (p.tid == 0) {
        float ws = -INFINITY;
        uint wi = 0xFFFFFFFFu;
        for (uint g = 0; g < p.n_sg; ++g) {
          const float s = as_type<float>(uint(red[2 * g]));
          const uint i = red[2 * g + 1];
          if (i != 0xFFFFFFFFu && (wi == 0xFFFFFFFFu || rank_before(s, i, ws, wi))) {
            ws = s;
            wi = i;
          }
        }
        red[2 * p.n_sg] = as_type<uint>(ws);
        red[2 * p.n_sg + 1] = wi;
        picks[t] = wi;
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      prev_s = as_type<float>(uint(red[2 * p.n_sg]));
      prev_i = red[2 * p.n_sg + 1];
      threadgroup_barrier(mem_flags::mem_threadgroup);  // red is rewritten next round
    }
  }
  // The list: sinks, picks ascending, window.
  for (uint i = p.tid; i < n_sinks; i += T) out[i] = int(i);
  if (pick && m > a.top_k) {
    for (uint t = p.tid; t < n_picks; t += T) {
      const uint v = picks[t];
      uint rank = 0;
      for (uint u = 0; u < n_picks; ++u) rank += uint(picks[u]) < v ? 1u : 0u;
      out[n_sinks + rank] = int(cb + v);
    }
  } else {
    for (uint i = p.tid; i < n_picks; i += T) out[n_sinks + i] = int(cb + i);
  }
  const uint n_win = pos + 1 - lo;
  for (uint i = p.tid; i < n_win; i += T) out[n_sinks + n_picks + i] = int(lo + i);
  if (p.tid == 0) n_cells[row] = int(n_sinks + n_picks + n_win);
}
