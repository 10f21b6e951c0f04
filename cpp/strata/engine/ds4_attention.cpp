// deepseek4's attention sub-layer (docs/models.md, deepseek4), in named steps over R rows at
// positions start .. start+R-1:
//   1. project: low-rank q (q_a), the shared K = V head, the compressor (and indexer compressor)
//      projections straight into the rows' cells, the indexer's head weights; then the normed
//      low-rank q through q_b and the indexer's q_b;
//   2. prepare_rows: per row the K = V vector (RMSNorm, RoPE on the last dims) into its cell, each
//      query head unweighted-RMSNorm-ed and rotated, the indexer queries rotated;
//   3. close_windows: the compressed entries whose windows the rows close (ds4_compressor.h);
//   4. pick_entries: a CSA row's compressed entries from the lightning indexer (ds4_indexer.h);
//   5. attend: per (row, head) softmax over the sliding window's K = V, the row's compressed
//      entries and the head's sink logit (probability mass without a value), then the inverse
//      rotation of the output's rope slice;
//   6. grouped output: heads in G groups, each projected by its block of attn_output_a, then attn_output_b.
// Steps 3–5 read only cells of positions <= the row's, all written by steps 1–3 of this run or an
// earlier one, so any split into chunks gives the same result.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "strata/engine/block.h"
#include "strata/engine/ds4_compressor.h"
#include "strata/engine/ds4_indexer.h"
#include "strata/engine/ds4_state.h"
#include "strata/engine/linear.h"
#include "strata/engine/multi_linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"
#include "strata/engine/vec_dot.h"

namespace strata::engine {
namespace {

// One layer's view of the run: its hyper-parameters, weights, state and the RoPE of its type.
struct Layer {
  const model::HParams& hp;
  const model::Ds4AttentionWeights& w;
  Ds4State& st;
  Scratch& s;
  int l;
  const Ds4Rope& rope;
};

void project(const BlockContext& c, const Layer& L, int R, int64_t start) {
  const model::Ds4AttentionWeights& w = L.w;
  Scratch& s = L.s;
  Ds4Scratch& ds = L.st.s;
  s.prep_x.reset(s.xn.data(), R, L.hp.n_embd, s.act_x.data());
  LinearTask* tasks = s.tasks.data();
  int nt = 0;
  auto add = [&](const model::Weight& wt, float* y) { tasks[nt++] = s.prep_x.task(wt, y); };
  add(w.q_a, ds.qa.data());
  add(w.kv, s.k.data());
  if (w.comp.present()) {
    add(w.comp.kv, L.st.cells.comp_kv(L.l, start));
    add(w.comp.gate, L.st.cells.comp_gate(L.l, start));
  }
  if (w.idx_comp.present()) {
    add(w.idx_comp.kv, L.st.cells.idx_kv(L.l, start));
    add(w.idx_comp.gate, L.st.cells.idx_gate(L.l, start));
    add(w.idx_proj, ds.iw.data());
  }
  run_linear_tasks(tasks, nt, c.pool);
  const int64_t ql = L.hp.ds4.q_lora;
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      rms_norm(ds.qa.data() + r * ql, ql, L.hp.rms_eps, w.q_a_norm, ds.qa.data() + r * ql);
  });
  linear(w.q_b, ds.qa.data(), R, s.q.data(), c.pool);
  if (w.idx_comp.present()) linear(w.idx_q_b, ds.qa.data(), R, ds.iq.data(), c.pool);
}

void prepare_rows(const BlockContext& c, const Layer& L, int R, int64_t start) {
  const model::HParams& hp = L.hp;
  Scratch& s = L.s;
  Ds4Scratch& ds = L.st.s;
  const int64_t dh = hp.head_dim, hq = hp.n_head, rd = hp.rope_dim;
  const int64_t hi = hp.ds4.idx_heads, di = hp.ds4.idx_dim;
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t p = start + r;
      float* cs = ds.cs.data() + r * rd;
      L.rope.angles(p, cs);
      float* kv = L.st.cells.kv(L.l, p);
      rms_norm(s.k.data() + r * dh, dh, hp.rms_eps, L.w.kv_norm, kv);
      L.rope.apply(kv, dh, cs);
      for (int64_t h = 0; h < hq; ++h) {
        float* q = s.qh.data() + (r * hq + h) * dh;
        rms_norm(s.q.data() + (r * hq + h) * dh, dh, hp.rms_eps, nullptr, q);
        L.rope.apply(q, dh, cs);
      }
      if (L.w.idx_comp.present())
        for (int64_t h = 0; h < hi; ++h) L.rope.apply(ds.iq.data() + (r * hi + h) * di, di, cs);
    }
  });
}

void close_windows(const BlockContext& c, const Layer& L, int R, int64_t start) {
  const int64_t ratio = L.w.ratio;
  if (ratio == 0) return;
  Ds4Cells& cells = L.st.cells;
  const float eps = L.hp.rms_eps;
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t p = start + r;
      if ((p + 1) % ratio != 0) continue;
      const int64_t entry = (p + 1) / ratio - 1;
      ds4_compress_entry(L.w.comp, cells.comp_kv(L.l, 0), cells.comp_gate(L.l, 0), entry, eps, L.rope,
                         cells.entry(L.l, entry));
      if (L.w.idx_comp.present())
        ds4_compress_entry(L.w.idx_comp, cells.idx_kv(L.l, 0), cells.idx_gate(L.l, 0), entry, eps, L.rope,
                           cells.idx_entry(L.l, entry));
    }
  });
}

void pick_entries(const BlockContext& c, const Layer& L, int R, int64_t start) {
  if (L.w.ratio != 4) return;
  const model::Ds4HParams& x = L.hp.ds4;
  Ds4Scratch& ds = L.st.s;
  const int hi = static_cast<int>(x.idx_heads), di = static_cast<int>(x.idx_dim);
  const int k = static_cast<int>(ds.pick_stride);  // top_k, or more than any row can see
  parallel_items(c.pool, R, [&](int slot, int64_t r) {
    const int64_t n_visible = (start + r + 1) / 4;
    ds.n_picks[static_cast<std::size_t>(r)] = ds4_indexer_pick(
        ds.iq.data() + r * hi * di, ds.iw.data() + r * hi, hi, di, L.st.cells.idx_entry(L.l, 0), n_visible, k,
        ds.slot_scores.data() + slot * ds.slot_len, ds.slot_order.data() + slot * ds.slot_len, ds.picks.data() + r * k);
  });
}

void attend(const BlockContext& c, const Layer& L, int R, int64_t start) {
  const model::HParams& hp = L.hp;
  Scratch& s = L.s;
  Ds4Scratch& ds = L.st.s;
  Ds4Cells& cells = L.st.cells;
  const int64_t dh = hp.head_dim, hq = hp.n_head, W = hp.ds4.window, ratio = L.w.ratio;
  const int64_t k = ds.pick_stride;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const VecKernels& vk = vec_kernels();
  parallel_items(c.pool, R * hq, [&](int slot, int64_t item) {
    const int64_t r = item / hq, h = item % hq, p = start + r;
    const float* q = s.qh.data() + (r * hq + h) * dh;
    float* out = s.att.data() + (r * hq + h) * dh;
    float* sc = ds.slot_scores.data() + slot * ds.slot_len;
    const int64_t lo = std::max<int64_t>(0, p - W + 1);
    // The sliding window's cells: lo .. p, or (the drafter's single-row runs) the entries of the
    // explicit list that lie in it, skipping the leading ones before lo.
    const int32_t* list = c.cell_list;
    int64_t list_from = 0;
    if (list)
      while (list_from < c.cell_list_n && list[list_from] < lo) ++list_from;
    const int64_t n_win = list ? c.cell_list_n - list_from : p - lo + 1;
    auto win_cell = [&](int64_t j) { return list ? static_cast<int64_t>(list[list_from + j]) : lo + j; };
    // The compressed entries of this row: all visible (HCA), the indexer's picks (CSA), none (sliding).
    const int64_t n_visible = ratio > 0 ? (p + 1) / ratio : 0;
    const int64_t n_comp = ratio == 4 ? ds.n_picks[static_cast<std::size_t>(r)] : n_visible;
    const int32_t* picks = ratio == 4 ? ds.picks.data() + r * k : nullptr;
    auto comp_key = [&](int64_t i) { return cells.entry(L.l, picks ? picks[i] : i); };
    const float sink = L.w.sinks[h];
    float m = sink;
    for (int64_t j = 0; j < n_win; ++j) {
      sc[j] = vk.dot_f32(q, cells.kv(L.l, win_cell(j)), dh) * scale;
      m = std::fmax(m, sc[j]);
    }
    for (int64_t i = 0; i < n_comp; ++i) {
      sc[n_win + i] = vk.dot_f32(q, comp_key(i), dh) * scale;
      m = std::fmax(m, sc[n_win + i]);
    }
    float sum = std::exp(sink - m);
    for (int64_t j = 0; j < n_win + n_comp; ++j) {
      sc[j] = std::exp(sc[j] - m);
      sum += sc[j];
    }
    const float inv = 1.0f / sum;
    std::memset(out, 0, sizeof(float) * static_cast<std::size_t>(dh));
    for (int64_t j = 0; j < n_win; ++j) vk.axpy_f32(sc[j] * inv, cells.kv(L.l, win_cell(j)), dh, out);
    for (int64_t i = 0; i < n_comp; ++i) vk.axpy_f32(sc[n_win + i] * inv, comp_key(i), dh, out);
    L.rope.apply(out, dh, ds.cs.data() + r * hp.rope_dim, /*inverse=*/true);
  });
}

void grouped_output(const BlockContext& c, const Layer& L, int R) {
  const model::HParams& hp = L.hp;
  Scratch& s = L.s;
  Ds4Scratch& ds = L.st.s;
  const int64_t G = hp.ds4.o_groups, rank = hp.ds4.o_lora;
  const int64_t width = hp.n_head * hp.head_dim, gw = width / G;
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(ds.group_in.data() + r * gw, s.att.data() + r * width + g * gw,
                  sizeof(float) * static_cast<std::size_t>(gw));
    linear(L.w.o_a.rows_slice(g * rank, rank), ds.group_in.data(), R, ds.group_out.data(), c.pool);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(ds.oa.data() + r * G * rank + g * rank, ds.group_out.data() + r * rank,
                  sizeof(float) * static_cast<std::size_t>(rank));
  }
  linear(L.w.o_b, ds.oa.data(), R, s.out.data(), c.pool);
}

// The K = V vectors of the rows alone (the drafter encoding committed positions; sliding-window
// layers only): the same cell bytes as project + prepare_rows write.
void write_kv(const BlockContext& c, const Layer& L, int R, int64_t start) {
  const model::HParams& hp = L.hp;
  Scratch& s = L.s;
  const int64_t dh = hp.head_dim, rd = hp.rope_dim;
  linear(L.w.kv, s.xn.data(), R, s.k.data(), c.pool);
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* cs = L.st.s.cs.data() + r * rd;
      L.rope.angles(start + r, cs);
      float* kv = L.st.cells.kv(L.l, start + r);
      rms_norm(s.k.data() + r * dh, dh, hp.rms_eps, L.w.kv_norm, kv);
      L.rope.apply(kv, dh, cs);
    }
  });
}

}  // namespace

void ds4_attention_write_kv(const BlockContext& c, int R, int64_t start) {
  Ds4State& st = *c.ds4;
  const Layer L{*c.hp, *c.ds4_attn, st, *c.s, c.kv_layer, st.rope_main};
  if (c.ds4_attn->ratio != 0) {  // a compressed layer's state needs the whole forward
    ds4_attention_forward(c, R, start);
    return;
  }
  write_kv(c, L, R, start);
}

void ds4_attention_forward(const BlockContext& c, int R, int64_t start) {
  Ds4State& st = *c.ds4;
  const Layer L{*c.hp, *c.ds4_attn, st, *c.s, c.kv_layer, c.ds4_attn->ratio > 0 ? st.rope_compress : st.rope_main};
  project(c, L, R, start);
  prepare_rows(c, L, R, start);
  close_windows(c, L, R, start);
  pick_entries(c, L, R, start);
  attend(c, L, R, start);
  grouped_output(c, L, R);
}

}  // namespace strata::engine
