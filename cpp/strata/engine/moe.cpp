// The MoE sub-layer (docs/gguf.md §2) in three fused dispatches (multi_linear.h):
//   1. router (+ the shared expert's gate, up and sigmoid-gate input) from the prepared xn rows;
//   then per row softmax and routing::route_row (plain top-K with default MoceParams and no
//   residency map) with renormalised weights;
//   2. gate and up of every routed (row, slot) entry, expert-major: the rows routed to one expert
//   share one pass over its weight slices of the 3-D tensors;
//   then silu(gate)·up per entry (and for the shared expert), prepared for the down weights;
//   3. down of every entry and of the shared expert.
// The weighted sum is left to the combine step (hc_combine, R-5).
// The routed experts' weights come through an experts::LayerPass (the expert store,
// docs/experts.md): steps 2 and 3 run once per batch of experts whose weights are ready — one batch
// of every expert from the mapping (mmap), or the resident experts first while the misses load
// (stream). Each entry's rows are computed the same way in any batch, so batching does not change
// the result.
#include <algorithm>
#include <cstring>

#include "strata/engine/block.h"
#include "strata/engine/multi_linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"
#include "strata/experts/expert_store.h"
#include "strata/routing/glm_scoring.h"
#include "strata/routing/router.h"
#include "strata/util/error.h"

namespace strata::engine {

void moe_forward(const BlockContext& c, int R) {
  const model::HParams& hp = *c.hp;
  const model::MoeWeights& w = c.w->moe;
  Scratch& s = *c.s;
  const int64_t d = hp.n_embd, E = hp.n_expert, K = hp.n_expert_used, F = hp.ff_expert, Fs = hp.ff_shared;
  LinearTask* tasks = s.tasks.data();

  // 1. Router and the shared expert's inputs.
  s.prep_x.reset(s.xn.data(), R, d, s.act_x.data());
  auto from_x = [&](const model::Weight& wt, float* y, int64_t y_stride) {
    LinearTask t;
    t.w = wt;
    t.act = s.prep_x.get(wt.type, &t.act_stride);
    t.nx = R;
    t.y = y;
    t.y_stride = y_stride;
    return t;
  };
  int nt = 0;
  tasks[nt++] = from_x(w.router, s.probs.data(), E);
  if (Fs > 0) {
    tasks[nt++] = from_x(w.sh_gate, s.sg.data(), Fs);
    tasks[nt++] = from_x(w.sh_up, s.su.data(), Fs);
    if (w.sh_gate_inp.present()) tasks[nt++] = from_x(w.sh_gate_inp, s.shared_gate.data(), 1);
  }
  run_linear_tasks(tasks, nt, c.pool);
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* p = s.probs.data() + r * E;
      const bool draft_row = c.draft_from_row >= 0 && r >= c.draft_from_row;
      if (hp.gating == model::Gating::Sigmoid) {  // glm4moe (routing/glm_scoring.h)
        const routing::SigmoidRouting sr{w.score_bias, hp.expert_weights_norm, hp.expert_weights_scale};
        routing::sigmoid_route_row(p, s.sel.data() + r * E, static_cast<int>(E), static_cast<int>(K), sr, c.resident,
                                   c.moce, draft_row, s.ids.data() + r * K, s.weights.data() + r * K);
        continue;
      }
      softmax(p, E);
      routing::route_row(p, static_cast<int>(E), static_cast<int>(K), c.resident, c.moce, draft_row,
                         s.ids.data() + r * K, s.weights.data() + r * K);
    }
  });

  // Group the (row, slot) entries by expert, experts in the pass's compute order, rows ascending
  // within an expert; each batch of the pass is then one contiguous run of entries.
  int32_t* count = s.expert_count.data();
  int32_t* offset = s.expert_offset.data();
  const int64_t n_entries = R * K;
  std::memset(count, 0, sizeof(int32_t) * static_cast<std::size_t>(E));
  for (int64_t i = 0; i < n_entries; ++i) ++count[s.ids[static_cast<std::size_t>(i)]];
  if (c.experts && c.experts->trace().on())
    c.experts->trace().record(c.expert_layer, s.probs.data(), R, s.ids.data(), static_cast<int>(K), c.resident, c.moce,
                              c.draft_from_row);
  experts::LayerPass pass(c.experts, c.expert_layer, w, count, E, s.expert_order.data());
  const int32_t* order = pass.order();
  int32_t first_entry = 0;
  for (int j = 0; j < pass.size(); ++j) {
    offset[order[j]] = first_entry;
    first_entry += count[order[j]];
  }
  for (int64_t e = 0; e < E; ++e) count[e] = 0;
  for (int64_t i = 0; i < n_entries; ++i) {
    const int32_t e = s.ids[static_cast<std::size_t>(i)];
    const std::size_t at = static_cast<std::size_t>(offset[e] + count[e]++);
    s.entries[at] = static_cast<int32_t>(i);
    s.entry_rows[at] = static_cast<int32_t>(i / K);
  }

  std::size_t gate_stride = 0, up_stride = 0;
  const uint8_t* act_gate = s.prep_x.get(w.gate.type, &gate_stride);
  const uint8_t* act_up = s.prep_x.get(w.up.type, &up_stride);
  const std::size_t down_stride = activation_bytes(w.down.type, F);
  const std::size_t sh_down_stride = Fs > 0 ? activation_bytes(w.sh_down.type, Fs) : 0;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(F, 1));
  bool shared_pending = Fs > 0;  // the shared expert's second half runs with the first batch
  while (pass.next_batch()) {
    const int j0 = pass.batch_begin(), j1 = pass.batch_end();
    // The batch's entries are the sorted positions [p0, p1).
    const int64_t p0 = offset[order[j0]], p1 = offset[order[j1 - 1]] + count[order[j1 - 1]];
    const int64_t n_shared = shared_pending ? R : 0;

    // 2. Gate and up of the batch's entries.
    nt = 0;
    for (int j = j0; j < j1; ++j) {
      const int64_t e = order[j];
      const int64_t m = count[e];
      const experts::ExpertView ew = pass.view(j);
      LinearTask g;
      g.w = ew.gate;
      g.act = act_gate;
      g.act_stride = gate_stride;
      g.act_rows = s.entry_rows.data() + offset[e];
      g.nx = m;
      g.y = s.ge.data();
      g.y_stride = F;
      g.y_rows = s.entries.data() + offset[e];
      LinearTask u = g;
      u.w = ew.up;
      u.act = act_up;
      u.act_stride = up_stride;
      u.y = s.ue.data();
      tasks[nt++] = g;
      tasks[nt++] = u;
    }
    run_linear_tasks(tasks, nt, c.pool);

    // silu(gate)·up per entry and for the shared expert, prepared for the down weights.
    parallel_ranges(c.pool, (p1 - p0) + n_shared, grain, [&](int64_t b, int64_t en) {
      for (int64_t q = b; q < en; ++q) {
        if (q < p1 - p0) {
          const int64_t i = s.entries[static_cast<std::size_t>(p0 + q)];
          float* h = s.ge.data() + i * F;
          swiglu(h, s.ue.data() + i * F, h, F);
          prepare_activations(w.down.type, h, 1, F, s.act_h.data() + static_cast<std::size_t>(i) * down_stride);
        } else {
          const int64_t r = q - (p1 - p0);
          float* h = s.sg.data() + r * Fs;
          swiglu(h, s.su.data() + r * Fs, h, Fs);
          prepare_activations(w.sh_down.type, h, 1, Fs, s.act_hs.data() + static_cast<std::size_t>(r) * sh_down_stride);
        }
      }
    });

    // 3. Down of the batch's entries (into routed[entry]) and of the shared expert.
    nt = 0;
    for (int j = j0; j < j1; ++j) {
      const int64_t e = order[j];
      const int64_t m = count[e];
      LinearTask t;
      t.w = pass.view(j).down;
      t.act = s.act_h.data();
      t.act_stride = down_stride;
      t.act_rows = s.entries.data() + offset[e];
      t.nx = m;
      t.y = s.routed.data();
      t.y_stride = d;
      t.y_rows = s.entries.data() + offset[e];
      tasks[nt++] = t;
    }
    if (shared_pending) {
      LinearTask t;
      t.w = w.sh_down;
      t.act = s.act_hs.data();
      t.act_stride = sh_down_stride;
      t.nx = R;
      t.y = s.shared.data();
      t.y_stride = d;
      tasks[nt++] = t;
    }
    run_linear_tasks(tasks, nt, c.pool);
    shared_pending = false;
  }
  if (Fs > 0 && w.sh_gate_inp.present())
    for (int64_t r = 0; r < R; ++r) s.shared_gate[static_cast<std::size_t>(r)] = sigmoid(s.shared_gate[static_cast<std::size_t>(r)]);
}

}  // namespace strata::engine
