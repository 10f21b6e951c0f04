// The MoE sub-layer (docs/gguf.md §2): router GEMM, softmax, top-K selection (routing::route_row:
// plain top-K with default MoceParams and no residency map) with renormalised weights, then the routed experts expert-major (the rows routed to one expert share one pass over
// its weights: a GEMM on the expert's slice of the 3-D tensors), and the shared expert with its
// sigmoid gate. The weighted sum is left to the combine step (hc_combine, R-5).
// The experts' weights come through an experts::LayerPass (the expert store, docs/experts.md):
// mmap views in id order, or resident experts first while the misses are read. Each expert's
// rows are computed the same way whatever the order, so the result does not depend on it.
#include <algorithm>
#include <cstring>

#include "strata/engine/block.h"
#include "strata/engine/linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"
#include "strata/experts/expert_store.h"
#include "strata/routing/router.h"

namespace strata::engine {

void moe_forward(const BlockContext& c, int R) {
  const model::HParams& hp = *c.hp;
  const model::MoeWeights& w = c.w->moe;
  Scratch& s = *c.s;
  const int64_t d = hp.n_embd, E = hp.n_expert, K = hp.n_expert_used, F = hp.ff_expert, Fs = hp.ff_shared;

  linear(w.router, s.xn.data(), R, s.probs.data(), c.pool);
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* p = s.probs.data() + r * E;
      softmax(p, E);
      const bool draft_row = c.draft_from_row >= 0 && r >= c.draft_from_row;
      routing::route_row(p, static_cast<int>(E), static_cast<int>(K), c.resident, c.moce, draft_row,
                         s.ids.data() + r * K, s.weights.data() + r * K);
    }
  });

  // Group (row, slot) entries by expert, rows ascending within an expert.
  int32_t* count = s.expert_count.data();
  int32_t* offset = s.expert_offset.data();
  std::memset(count, 0, sizeof(int32_t) * static_cast<std::size_t>(E));
  for (int64_t i = 0; i < R * K; ++i) ++count[s.ids[static_cast<std::size_t>(i)]];
  offset[0] = 0;
  for (int64_t e = 0; e < E; ++e) offset[e + 1] = offset[e] + count[e];
  for (int64_t e = 0; e < E; ++e) count[e] = 0;
  for (int64_t i = 0; i < R * K; ++i) {
    const int32_t e = s.ids[static_cast<std::size_t>(i)];
    s.entries[static_cast<std::size_t>(offset[e] + count[e]++)] = static_cast<int32_t>(i);
  }

  if (c.experts && c.experts->trace().on())
    c.experts->trace().record(c.expert_layer, s.probs.data(), R, s.ids.data(), static_cast<int>(K), c.resident, c.moce,
                              c.draft_from_row);
  experts::LayerPass pass(c.experts, c.expert_layer, w, count, E);
  // The shared expert first: the reads the pass started for missing experts proceed meanwhile.
  if (Fs > 0) {
    linear(w.sh_gate, s.xn.data(), R, s.sg.data(), c.pool);
    linear(w.sh_up, s.xn.data(), R, s.su.data(), c.pool);
    parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t en) {
      for (int64_t r = b; r < en; ++r) swiglu(s.sg.data() + r * Fs, s.su.data() + r * Fs, s.sg.data() + r * Fs, Fs);
    });
    linear(w.sh_down, s.sg.data(), R, s.shared.data(), c.pool);
    linear(w.sh_gate_inp, s.xn.data(), R, s.shared_gate.data(), c.pool);
    for (int64_t r = 0; r < R; ++r) s.shared_gate[static_cast<std::size_t>(r)] = sigmoid(s.shared_gate[static_cast<std::size_t>(r)]);
  }
  while (pass.next()) {
    const int64_t e = pass.expert();
    const experts::ExpertView& ew = pass.view();
    const int64_t m = count[e];
    const int32_t* ent = s.entries.data() + offset[e];
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(s.xe.data() + i * d, s.xn.data() + (ent[i] / K) * d, sizeof(float) * static_cast<std::size_t>(d));
    linear(ew.gate, s.xe.data(), m, s.ge.data(), c.pool);
    linear(ew.up, s.xe.data(), m, s.ue.data(), c.pool);
    parallel_ranges(c.pool, m, 1, [&](int64_t b, int64_t en) {
      for (int64_t i = b; i < en; ++i) swiglu(s.ge.data() + i * F, s.ue.data() + i * F, s.ge.data() + i * F, F);
    });
    linear(ew.down, s.ge.data(), m, s.de.data(), c.pool);
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(s.routed.data() + static_cast<int64_t>(ent[i]) * d, s.de.data() + i * d,
                  sizeof(float) * static_cast<std::size_t>(d));
  }
}

}  // namespace strata::engine
