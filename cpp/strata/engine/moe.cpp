// The MoE sub-layer (docs/gguf.md §2), in named steps:
//   1. route_rows: the router (and the shared expert's sigmoid-gate input) from the prepared xn
//      rows, then per row softmax and routing::route_row with renormalised weights;
//   2. group_by_expert: the (row, slot) entries sorted by expert in the expert pass's compute
//      order, rows ascending within an expert;
//   3. per batch of experts whose weights are ready (experts::LayerPass): gate_up_pass — gate and
//      up of every entry of the batch (and, with the first batch, of the shared expert) in ONE
//      parallel region (multi_linear.h), the rows routed to one expert sharing one pass over its
//      weight slices; swiglu_pass — silu(gate)·up, prepared for the down weights; down_pass — all
//      down projections in a second region.
// xn is converted to each activation form once per layer (PreparedInput) and read by every step.
// No step waits per expert: a region's blocks of all experts are claimed by whichever thread is
// free. The weighted sum is left to the combine step (hc_combine, R-5).
// The routed experts' weights come through an experts::LayerPass (the expert store,
// docs/experts.md): one batch of every expert from the mapping (mmap), or the resident experts
// first while the misses load (stream). Each entry's rows are computed the same way in any batch,
// so batching does not change the result.
#include <algorithm>
#include <cstring>

#include "strata/engine/block.h"
#include "strata/engine/multi_linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"
#include "strata/experts/expert_store.h"
#include "strata/routing/ds4_scoring.h"
#include "strata/routing/glm_scoring.h"
#include "strata/routing/router.h"
#include "strata/routing/window_routing.h"
#include "strata/util/error.h"

namespace strata::engine {
namespace {

// One row's experts by the layer's gating rule into ids / weights; p, the row's router output, is
// overwritten (probabilities or scores), sel is E floats of scratch for the sigmoid rules. hashed: a
// deepseek4 token-hashed layer's experts for the row (nullptr otherwise); resident_only: the drafter's
// resident-only rule (softmax gating, routing/router.h).
void select_row(const model::HParams& hp, const model::MoeWeights& w, float* p, float* sel, const int32_t* hashed,
                const uint8_t* resident, const routing::MoceParams& mp, bool draft_row, bool resident_only,
                int32_t* ids, float* weights) {
  const int E = static_cast<int>(hp.n_expert), K = static_cast<int>(hp.n_expert_used);
  if (hp.gating == model::Gating::SqrtSoftplus) {  // deepseek4 (routing/ds4_scoring.h)
    const routing::SigmoidRouting sr{w.score_bias, hp.expert_weights_norm, hp.expert_weights_scale};
    routing::sqrt_softplus_route_row(p, sel, E, K, sr, hashed, resident, mp, draft_row, ids, weights);
    return;
  }
  if (hp.gating == model::Gating::Sigmoid) {  // glm4moe (routing/glm_scoring.h)
    const routing::SigmoidRouting sr{w.score_bias, hp.expert_weights_norm, hp.expert_weights_scale};
    routing::sigmoid_route_row(p, sel, E, K, sr, resident, mp, draft_row, ids, weights);
    return;
  }
  softmax(p, E);
  if (resident_only && routing::keep_resident_only(p, E, K, resident))
    resident = nullptr;  // top-K among the resident experts: plain routing over what is left
  routing::route_row(p, E, K, resident, mp, draft_row, ids, weights);
}

bool is_draft_row(const BlockContext& c, int64_t r) { return c.draft_from_row >= 0 && r >= c.draft_from_row; }

// Rows [0, n) each route alone, by the layer's rule against the residency. With window routing the draft
// rows after them route one after another against the residency plus the window's requests.
int64_t rows_routed_alone(const BlockContext& c, int64_t R) {
  return routing::window_routing_on(c.moce) && c.draft_from_row >= 0 ? std::min<int64_t>(R, c.draft_from_row) : R;
}

// 1. Router logits (and the shared expert's gate input), softmax, top-K per row into s.ids / s.weights.
void route_rows(const BlockContext& c, int R) {
  const model::HParams& hp = *c.hp;
  const model::MoeWeights& w = c.w->moe;
  Scratch& s = *c.s;
  const int64_t E = hp.n_expert, K = hp.n_expert_used;
  LinearTask* tasks = s.tasks.data();
  int nt = 0;
  tasks[nt++] = s.prep_x.task(w.router, s.probs.data(), E);
  if (c.next_moe) tasks[nt++] = s.prep_x.task(c.next_moe->router, s.next_probs.data(), E);
  // glm4moe's shared expert has no sigmoid gate (weight 1).
  if (hp.ff_shared > 0 && w.sh_gate_inp.present()) tasks[nt++] = s.prep_x.task(w.sh_gate_inp, s.shared_gate.data(), 1);
  run_linear_tasks(tasks, nt, c.pool);
  auto route_one = [&](int64_t r, const uint8_t* resident, const routing::MoceParams& mp, bool draft_row) {
    const int32_t* hashed = w.tid2eid ? w.tid2eid + static_cast<int64_t>(c.tokens[r]) * K : nullptr;
    select_row(hp, w, s.probs.data() + r * E, s.sel.data() + r * E, hashed, resident, mp, draft_row, c.resident_only,
               s.ids.data() + r * K, s.weights.data() + r * K);
  };
  // Streaming-aware windows (routing/window_routing.h): the draft rows go one after another against the
  // residency plus what the rows before them requested; the target rows as usual, in parallel.
  const int64_t n_target = rows_routed_alone(c, R);
  parallel_ranges(c.pool, n_target, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) route_one(r, c.resident, c.moce, is_draft_row(c, r));
  });
  if (n_target == R) return;
  uint8_t* map = s.window_map.data();
  routing::window_map_begin(map, c.resident, static_cast<int>(E), s.ids.data(), n_target * K);
  const routing::MoceParams wp = routing::window_draft_params(c.moce);
  for (int64_t r = n_target; r < R; ++r) {
    route_one(r, map, wp, true);
    routing::window_map_add(map, s.ids.data() + r * K, static_cast<int>(K));
  }
}

// The next MoE layer's experts as its own routing rule picks them from its router's output on this
// layer's input (the residual stream changes little from one layer to the next), against that layer's
// residency as it stands now: with MOCE the rule leans on resident experts, and a prediction without the
// map would read experts the layer then avoids (with MOCE off the map changes nothing). A prediction
// only: what it reads early is what the next layer may need; the next layer routes as always. While
// this layer's pass is open, the next layer's entries are written by the compute thread alone (reader
// threads mark only the running layer's), so the prediction does not depend on read timing. Runs after
// route_rows, so the rows' s.sel may be reused.
void predict_next(const BlockContext& c, int R) {
  const model::HParams& hp = *c.hp;
  const int64_t E = hp.n_expert, K = hp.n_expert_used;
  Scratch& s = *c.s;
  uint8_t* want = s.next_want.data();
  std::memset(want, 0, static_cast<std::size_t>(E));
  int32_t ids[routing::kMaxTopK];
  float weights[routing::kMaxTopK];
  // In a window with exact cuts, only the rows that cannot be cut: the others are drafts the drafter was
  // unsure of, which the next layer may drop (their reads would often be for nothing). With window
  // routing, only the target rows: the draft rows route against what the window already requested,
  // which the prediction cannot know (predicted alone, they read experts those rows then avoided).
  const int64_t rows =
      std::min<int64_t>(rows_routed_alone(c, R), c.cut_from_row >= 1 ? std::min(R, c.cut_from_row) : R);
  const uint8_t* resident = c.experts->resident_map(c.expert_layer + 1);
  for (int64_t r = 0; r < rows; ++r) {
    select_row(hp, *c.next_moe, s.next_probs.data() + r * E, s.sel.data() + r * E, nullptr, resident, c.moce,
               is_draft_row(c, r), false, ids, weights);
    for (int64_t k = 0; k < K; ++k) want[ids[k]] = 1;
  }
}

// 2. Sorted positions: expert order[j]'s entries are s.entries[offset[e] .. offset[e] + count[e]).
void group_by_expert(const BlockContext& c, int R, const experts::LayerPass& pass) {
  Scratch& s = *c.s;
  const int64_t E = c.hp->n_expert, K = c.hp->n_expert_used;
  int32_t* count = s.expert_count.data();
  int32_t* offset = s.expert_offset.data();
  const int64_t n_entries = R * K;
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
}

// 3a. Gate and up of the batch's experts [j0, j1) (and the shared expert's) in one region.
void gate_up_pass(const BlockContext& c, const experts::LayerPass& pass, int j0, int j1, bool shared) {
  const model::MoeWeights& w = c.w->moe;
  Scratch& s = *c.s;
  const int64_t F = c.hp->ff_expert, Fs = c.hp->ff_shared;
  const int32_t* order = pass.order();
  std::size_t gate_stride = 0, up_stride = 0;
  const uint8_t* act_gate = s.prep_x.get(w.gate.type, &gate_stride);
  const uint8_t* act_up = s.prep_x.get(w.up.type, &up_stride);
  LinearTask* tasks = s.tasks.data();
  int nt = 0;
  for (int j = j0; j < j1; ++j) {
    const int64_t e = order[j];
    const experts::ExpertView ew = pass.view(j);
    LinearTask g;
    g.w = ew.gate;
    g.act = act_gate;
    g.act_stride = gate_stride;
    g.act_rows = s.entry_rows.data() + s.expert_offset[e];
    g.nx = s.expert_count[e];
    g.y = s.ge.data();
    g.y_stride = F;
    g.y_rows = s.entries.data() + s.expert_offset[e];
    LinearTask u = g;
    u.w = ew.up;
    u.act = act_up;
    u.act_stride = up_stride;
    u.y = s.ue.data();
    tasks[nt++] = g;
    tasks[nt++] = u;
  }
  if (shared) {
    tasks[nt++] = s.prep_x.task(w.sh_gate, s.sg.data(), Fs);
    tasks[nt++] = s.prep_x.task(w.sh_up, s.su.data(), Fs);
  }
  run_linear_tasks(tasks, nt, c.pool);
}

// 3b. silu(gate)·up of the sorted entries [p0, p1) and of the shared expert's R rows (when `shared`),
// prepared for the down weights.
void swiglu_pass(const BlockContext& c, int R, int64_t p0, int64_t p1, bool shared) {
  const model::MoeWeights& w = c.w->moe;
  Scratch& s = *c.s;
  const int64_t F = c.hp->ff_expert, Fs = c.hp->ff_shared;
  const std::size_t down_stride = activation_bytes(w.down.type, F);
  const std::size_t sh_down_stride = Fs > 0 ? activation_bytes(w.sh_down.type, Fs) : 0;
  // A few entries per piece: a decode row's 8 entries go to two threads (as one piece they were a
  // serial gap of several microseconds between the gate/up and down regions).
  const int64_t grain = std::max<int64_t>(1, 2048 / std::max<int64_t>(F, 1));
  const int64_t n_shared = shared ? R : 0;
  parallel_ranges(c.pool, (p1 - p0) + n_shared, grain, [&](int64_t b, int64_t en) {
    for (int64_t q = b; q < en; ++q) {
      if (q < p1 - p0) {
        const int64_t i = s.entries[static_cast<std::size_t>(p0 + q)];
        float* h = s.ge.data() + i * F;
        swiglu_clamped(h, s.ue.data() + i * F, h, F, c.clamp_exp);
        prepare_activations(w.down.type, h, 1, F, s.act_h.data() + static_cast<std::size_t>(i) * down_stride);
      } else {
        const int64_t r = q - (p1 - p0);
        float* h = s.sg.data() + r * Fs;
        swiglu_clamped(h, s.su.data() + r * Fs, h, Fs, c.clamp_shexp);
        prepare_activations(w.sh_down.type, h, 1, Fs, s.act_hs.data() + static_cast<std::size_t>(r) * sh_down_stride);
      }
    }
  });
}

// 3c. Down of the batch's entries (into routed[entry]) and of the shared expert, one region.
void down_pass(const BlockContext& c, int R, const experts::LayerPass& pass, int j0, int j1, bool shared) {
  const model::MoeWeights& w = c.w->moe;
  Scratch& s = *c.s;
  const int64_t d = c.hp->n_embd, F = c.hp->ff_expert, Fs = c.hp->ff_shared;
  const int32_t* order = pass.order();
  LinearTask* tasks = s.tasks.data();
  int nt = 0;
  for (int j = j0; j < j1; ++j) {
    const int64_t e = order[j];
    LinearTask t;
    t.w = pass.view(j).down;
    t.act = s.act_h.data();
    t.act_stride = activation_bytes(w.down.type, F);
    t.act_rows = s.entries.data() + s.expert_offset[e];
    t.nx = s.expert_count[e];
    t.y = s.routed.data();
    t.y_stride = d;
    t.y_rows = s.entries.data() + s.expert_offset[e];
    tasks[nt++] = t;
  }
  if (shared) {
    LinearTask t;
    t.w = w.sh_down;
    t.act = s.act_hs.data();
    t.act_stride = activation_bytes(w.sh_down.type, Fs);
    t.nx = R;
    t.y = s.shared.data();
    t.y_stride = d;
    tasks[nt++] = t;
  }
  run_linear_tasks(tasks, nt, c.pool);
}

}  // namespace

int moe_forward(const BlockContext& c, int R) {
  const model::HParams& hp = *c.hp;
  const model::MoeWeights& w = c.w->moe;
  Scratch& s = *c.s;
  const int64_t d = hp.n_embd, E = hp.n_expert, K = hp.n_expert_used, Fs = hp.ff_shared;

  s.prep_x.reset(s.xn.data(), R, d, s.act_x.data());
  route_rows(c, R);
  // An exact window cut (routing/window_routing.h): the rows from the first one that would read an
  // expert no earlier row reads stop here; the rest of the pass runs the rows before it alone.
  if (c.cut_from_row >= 1)
    R = routing::window_rows_kept(c.resident, static_cast<int>(E), s.ids.data(), static_cast<int>(K), R, c.cut_from_row,
                                  s.window_map.data());

  int32_t* count = s.expert_count.data();
  std::memset(count, 0, sizeof(int32_t) * static_cast<std::size_t>(E));
  for (int64_t i = 0; i < R * K; ++i) ++count[s.ids[static_cast<std::size_t>(i)]];
  if (c.experts && c.experts->trace().on())
    c.experts->trace().record(c.expert_layer, s.probs.data(), R, s.ids.data(), static_cast<int>(K), c.resident, c.moce,
                              c.draft_from_row);
  // In a verification window the store is told which experts the target rows use: the others only draft
  // rows use, and it releases them where its retention duel says (experts/draft_retention.h). The cut and
  // window routing are done with s.window_map by now.
  const uint8_t* target_used = nullptr;
  if (c.experts && c.resident && c.draft_from_row >= 1 && R > c.draft_from_row) {
    routing::window_map_begin(s.window_map.data(), nullptr, static_cast<int>(E), s.ids.data(), c.draft_from_row * K);
    target_used = s.window_map.data();
  }
  experts::LayerPass pass(c.experts, c.expert_layer, w, count, E, s.expert_order.data(), target_used);
  if (c.next_moe) {  // after this layer's own reads are queued
    predict_next(c, R);
    c.experts->prefetch(c.expert_layer + 1, s.next_want.data());
  }
  group_by_expert(c, R, pass);

  const int32_t* order = pass.order();
  const int32_t* offset = s.expert_offset.data();
  bool shared_pending = Fs > 0;  // the shared expert runs with the first batch
  while (pass.next_batch()) {
    const int j0 = pass.batch_begin(), j1 = pass.batch_end();
    // The batch's entries are the sorted positions [p0, p1).
    const int64_t p0 = offset[order[j0]], p1 = offset[order[j1 - 1]] + count[order[j1 - 1]];
    gate_up_pass(c, pass, j0, j1, shared_pending);
    swiglu_pass(c, R, p0, p1, shared_pending);
    down_pass(c, R, pass, j0, j1, shared_pending);
    shared_pending = false;
  }
  if (Fs > 0 && w.sh_gate_inp.present())
    for (int64_t r = 0; r < R; ++r)
      s.shared_gate[static_cast<std::size_t>(r)] = sigmoid(s.shared_gate[static_cast<std::size_t>(r)]);
  return R;
}

}  // namespace strata::engine
