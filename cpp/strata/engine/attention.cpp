// The attention sub-layer ("QSA", docs/gguf.md §2): projections (+ glm4moe's optional biases),
// per-head q/k RMSNorm (optional in glm4moe), NEOX RoPE
// at the row's position, K/V (and indexer key) writes into the row's cell, cell selection, chunked
// softmax attention per head, the σ(gate) and the output projection.
#include <algorithm>
#include <cstring>

#include "strata/engine/attention_head.h"
#include "strata/engine/attention_kernels.h"
#include "strata/engine/block.h"
#include "strata/engine/linear.h"
#include "strata/engine/multi_linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"

namespace strata::engine {

namespace {

// The projections of the R rows of s.xn in one dispatch: k, v and the indexer key always; with
// queries also q and the indexer's queries and head weights.
void project(const BlockContext& c, int R, bool queries) {
  const model::HParams& hp = *c.hp;
  const model::AttentionWeights& w = c.w->attn;
  Scratch& s = *c.s;
  s.prep_x.reset(s.xn.data(), R, hp.n_embd, s.act_x.data());
  LinearTask* tasks = s.tasks.data();
  int nt = 0;
  auto add = [&](const model::Weight& wt, float* y) { tasks[nt++] = s.prep_x.task(wt, y); };
  add(w.k, s.k.data());
  add(w.v, s.v.data());
  if (c.use_indexer) add(w.idx_k, s.ik.data());
  if (queries) {
    add(w.q, s.q.data());
    if (c.use_indexer) {
      add(w.idx_q, s.iq.data());
      add(w.idx_w, s.iw.data());
    }
  }
  run_linear_tasks(tasks, nt, c.pool);
  // glm4moe's projection biases (absent elsewhere).
  auto add_bias = [&](const float* bias, float* y, int64_t n) {
    if (!bias) return;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < n; ++i) y[r * n + i] += bias[i];
  };
  add_bias(w.k_bias, s.k.data(), hp.kv_rows());
  add_bias(w.v_bias, s.v.data(), hp.kv_rows());
  if (queries) add_bias(w.q_bias, s.q.data(), hp.q_rows());
}

// k-norm and RoPE at the row's position (angles kept for the queries), K/V and indexer-key writes.
void store_kv(const BlockContext& c, int R, int64_t start) {
  const model::HParams& hp = *c.hp;
  const model::AttentionWeights& w = c.w->attn;
  Scratch& s = *c.s;
  KvCells& kv = *c.kv;
  const int64_t dh = hp.head_dim, hkv = hp.n_head_kv, kvrows = hp.kv_rows(), rd = hp.rope_dim;
  kv.prepare_write(c.kv_layer, start, R);
  if (s.rope_of != c.rope) {  // angles cached for another rope (the drafter's block shares the scratch)
    std::fill(s.rope_pos.data(), s.rope_pos.data() + s.rope_pos.size(), int64_t{-1});
    s.rope_of = c.rope;
  }
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t p = start + r;
      float* cs = s.rope_cs.data() + r * std::max<int64_t>(rd, 1);
      if (rd > 0 && s.rope_pos[static_cast<std::size_t>(r)] != p) {
        c.rope->angles(p, cs);
        s.rope_pos[static_cast<std::size_t>(r)] = p;
      }
      float* kr = s.k.data() + r * kvrows;
      for (int64_t g = 0; g < hkv; ++g) {
        if (w.k_norm) rms_norm(kr + g * dh, dh, hp.rms_eps, w.k_norm, kr + g * dh);  // optional in glm4moe
        if (rd > 0) c.rope->apply(kr + g * dh, cs);
      }
      kv.write(c.kv_layer, p, kr, s.v.data() + r * kvrows);
    }
  });
  if (c.use_indexer) {
    const int64_t di = hp.indexer_dim;
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(kv.indexer_key(c.kv_layer, start + r), s.ik.data() + r * di,
                  sizeof(float) * static_cast<std::size_t>(di));
  }
}

}  // namespace

void attention_write_kv(const BlockContext& c, int R, int64_t start) {
  project(c, R, false);
  store_kv(c, R, start);
}

void attention_forward(const BlockContext& c, int R, int64_t start) {
  const model::HParams& hp = *c.hp;
  const model::AttentionWeights& w = c.w->attn;
  Scratch& s = *c.s;
  KvCells& kv = *c.kv;
  const int64_t dh = hp.head_dim, hq = hp.n_head, hkv = hp.n_head_kv;
  const int64_t qrows = hp.q_rows(), rd = hp.rope_dim;
  const bool gated = hp.attn_gated;

  project(c, R, true);
  store_kv(c, R, start);
  // Query head h of row r: q-norm and RoPE with the row's angles, into s.qh. Each attention item
  // below prepares its own heads (a decode row's 16 heads were a serial loop on the calling thread).
  auto prepare_query = [&](int64_t r, int64_t h) {
    const float* cs = s.rope_cs.data() + r * std::max<int64_t>(rd, 1);
    const float* src = s.q.data() + r * qrows + (gated ? 2 * h * dh : h * dh);
    float* dst = s.qh.data() + (r * hq + h) * dh;
    if (w.q_norm)
      rms_norm(src, dh, hp.rms_eps, w.q_norm, dst);
    else
      std::memcpy(dst, src, sizeof(float) * static_cast<std::size_t>(dh));
    if (rd > 0) c.rope->apply(dst, cs);
  };
  const int hi = static_cast<int>(hp.indexer_heads), di = static_cast<int>(hp.indexer_dim);

  // Cell lists.
  const CellPolicy& pol = c.policy;
  const bool implicit = pol.window <= 0 && !c.cell_list;
  const int64_t list_stride = s.shape.max_list;
  // Per slot: the indexer's scores (one row) or the attention scores of T rows' head group (T·G per cell).
  const int64_t score_stride = std::max(s.shape.max_ctx, s.shape.max_list) * s.head_group * s.rows_per_pass;
  if (c.cell_list) {
    // An explicit list from the caller (a single row: the drafter's own cell bookkeeping).
    std::memcpy(s.cells.data(), c.cell_list, sizeof(int32_t) * static_cast<std::size_t>(c.cell_list_n));
    s.n_cells[0] = c.cell_list_n;
  } else if (implicit) {
    for (int64_t r = 0; r < R; ++r) s.n_cells[static_cast<std::size_t>(r)] = start + r + 1;
  } else {
    auto score_range = [&](int64_t r, const Candidates& cand, float* scores, int64_t b, int64_t e) {
      const float* qi = s.iq.data() + r * hi * di;
      const float* wi = s.iw.data() + r * hi;
      attn_kernels().indexer_scores(qi, wi, hi, di, kv.indexer_key(c.kv_layer, cand.begin + b), e - b, scores + b);
    };
    auto needs_scores = [&](const Candidates& cand) {
      return c.use_indexer && pol.top_k > 0 && cand.size() > pol.top_k;
    };
    const bool few_rows = R < parallel_slots_count(c.pool);
    if (few_rows) {
      // Decode and short windows: score each row's candidates across the pool.
      for (int64_t r = 0; r < R; ++r) {
        const int64_t p = start + r;
        const Candidates cand = indexer_candidates(pol, p);
        float* scores = s.slot_scores.data();
        if (needs_scores(cand))
          parallel_ranges(c.pool, cand.size(), 256, [&](int64_t b, int64_t e) { score_range(r, cand, scores, b, e); });
        s.n_cells[static_cast<std::size_t>(r)] = select_cells(pol, p, c.use_indexer ? scores : nullptr,
                                                              s.slot_order.data(), s.cells.data() + r * list_stride);
      }
    } else {
      parallel_items(c.pool, R, [&](int slot, int64_t r) {
        const int64_t p = start + r;
        const Candidates cand = indexer_candidates(pol, p);
        float* scores = s.slot_scores.data() + slot * score_stride;
        if (needs_scores(cand)) score_range(r, cand, scores, 0, cand.size());
        s.n_cells[static_cast<std::size_t>(r)] =
            select_cells(pol, p, c.use_indexer ? scores : nullptr, s.slot_order.data() + slot * s.shape.max_ctx,
                         s.cells.data() + r * list_stride);
      });
    }
  }

  // Attention per (row, group of query heads sharing a KV head): each key and value is read once
  // for the group (attend_group; per head bitwise attend_head).
  const int64_t group = hq / hkv;
  const int64_t gsize = std::min<int64_t>(group, kMaxHeadGroup);
  const int64_t subgroups = (group + gsize - 1) / gsize;
  const int64_t per_row = hkv * subgroups;
  auto gate = [&](int64_t r, int64_t h0, int G, float* const* outs) {
    if (!gated) return;
    for (int g = 0; g < G; ++g) {
      const float* gt = s.q.data() + r * qrows + 2 * (h0 + g) * dh + dh;
      for (int64_t i = 0; i < dh; ++i) outs[g][i] *= sigmoid(gt[i]);
    }
  };
  // Several rows over the implicit list (a window or a prefill chunk): T rows' heads of a KV head in
  // one pass, each key read once for all of them (attend_rows; bitwise the row-by-row attend_group).
  // Fewer rows a pass where tiles would leave threads without an item (a short window on many threads).
  const int64_t fill = std::max<int64_t>(1, R * per_row / std::max(parallel_slots_count(c.pool), 1));
  const int64_t T = implicit ? std::min({static_cast<int64_t>(s.rows_per_pass), kMaxHeadGroup / gsize, fill}) : 1;
  if (R > 1 && T > 1) {
    const int64_t tiles = (R + T - 1) / T;
    parallel_items(c.pool, tiles * per_row, [&](int slot, int64_t item) {
      const int64_t r0 = (item / per_row) * T, j = item % per_row;
      const int64_t kvh = j / subgroups;
      const int64_t h0 = kvh * group + (j % subgroups) * gsize;
      const int G = static_cast<int>(std::min(gsize, (kvh + 1) * group - h0));
      const int nt = static_cast<int>(std::min(T, R - r0));
      const float* qs[kMaxHeadGroup];
      float* outs[kMaxHeadGroup];
      for (int t = 0; t < nt; ++t)
        for (int g = 0; g < G; ++g) {
          prepare_query(r0 + t, h0 + g);
          qs[t * G + g] = s.qh.data() + ((r0 + t) * hq + h0 + g) * dh;
          outs[t * G + g] = s.att.data() + ((r0 + t) * hq + h0 + g) * dh;
        }
      attend_rows(kv, c.kv_layer, static_cast<int>(kvh), qs, G, nt, s.n_cells[static_cast<std::size_t>(r0)],
                  s.slot_scores.data() + slot * score_stride, s.slot_chunk.data() + slot * gsize * dh, outs);
      for (int t = 0; t < nt; ++t) gate(r0 + t, h0, G, outs + t * G);
    });
    linear(w.o, s.att.data(), R, s.out.data(), c.pool);
    return;
  }
  parallel_items(c.pool, R * per_row, [&](int slot, int64_t item) {
    const int64_t r = item / per_row, j = item % per_row;
    const int64_t kvh = j / ((group + gsize - 1) / gsize);
    const int64_t h0 = kvh * group + (j % ((group + gsize - 1) / gsize)) * gsize;
    const int G = static_cast<int>(std::min(gsize, (kvh + 1) * group - h0));
    const int32_t* list = implicit ? nullptr : s.cells.data() + r * list_stride;
    const float* qs[kMaxHeadGroup];
    float* outs[kMaxHeadGroup];
    for (int g = 0; g < G; ++g) {
      prepare_query(r, h0 + g);
      qs[g] = s.qh.data() + (r * hq + h0 + g) * dh;
      outs[g] = s.att.data() + (r * hq + h0 + g) * dh;
    }
    attend_group(kv, c.kv_layer, static_cast<int>(kvh), qs, G, list, s.n_cells[static_cast<std::size_t>(r)],
                 s.slot_scores.data() + slot * score_stride, s.slot_chunk.data() + slot * gsize * dh, outs);
    gate(r, h0, G, outs);
  });

  linear(w.o, s.att.data(), R, s.out.data(), c.pool);
}

}  // namespace strata::engine
