// The dense SwiGLU FFN of glm4moe's leading layers (docs/gguf.md §4): s.xn -> s.out,
// out = down(silu(gate · x) ⊙ up · x), in two fused dispatches like the shared expert of moe.cpp
// (gate and up together, then down), in the shared expert's scratch (sized for the wider of the two).
#include <algorithm>

#include "strata/engine/block.h"
#include "strata/engine/multi_linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"

namespace strata::engine {

void dense_ffn_forward(const BlockContext& c, int R) {
  const model::HParams& hp = *c.hp;
  const model::DenseFfnWeights& w = c.w->dense;
  Scratch& s = *c.s;
  const int64_t d = hp.n_embd, Fd = hp.ff_dense;
  LinearTask* tasks = s.tasks.data();

  s.prep_x.reset(s.xn.data(), R, d, s.act_x.data());
  tasks[0] = s.prep_x.task(w.gate, s.sg.data(), Fd);
  tasks[1] = s.prep_x.task(w.up, s.su.data(), Fd);
  run_linear_tasks(tasks, 2, c.pool);

  const std::size_t down_stride = activation_bytes(w.down.type, Fd);
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* h = s.sg.data() + r * Fd;
      swiglu(h, s.su.data() + r * Fd, h, Fd);
      prepare_activations(w.down.type, h, 1, Fd, s.act_hs.data() + static_cast<std::size_t>(r) * down_stride);
    }
  });
  LinearTask t;
  t.w = w.down;
  t.act = s.act_hs.data();
  t.act_stride = down_stride;
  t.nx = R;
  t.y = s.out.data();
  t.y_stride = d;
  tasks[0] = t;
  run_linear_tasks(tasks, 1, c.pool);
}

}  // namespace strata::engine
