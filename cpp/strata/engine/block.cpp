#include "strata/engine/block.h"

#include <cstring>

#include "strata/engine/hc_combine.h"
#include "strata/engine/hyper_connections.h"
#include "strata/engine/linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"

namespace strata::engine {

void hc_enter(const model::HParams& hp, const model::HyperConnWeights& hc, const float* X, int R, Scratch& s,
              ThreadPool* pool) {
  const int n = static_cast<int>(hp.hc_count);
  const int64_t d = hp.n_embd, nd = n * d;
  if (n == 1) {
    std::memcpy(s.collapsed.data(), X, sizeof(float) * static_cast<std::size_t>(R * d));
    for (int r = 0; r < R; ++r) {
      s.post[static_cast<std::size_t>(r)] = 1.0f;
      s.comb[static_cast<std::size_t>(r)] = 1.0f;
    }
    return;
  }
  const int64_t nmix = (2 + n) * n;
  parallel_ranges(pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) rms_norm(X + r * nd, nd, hp.rms_eps, nullptr, s.flat.data() + r * nd);
  });
  linear(f32_weight(hc.fn, nmix, nd), s.flat.data(), R, s.mix.data(), pool);
  parallel_ranges(pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      hc_coefficients(s.mix.data() + r * nmix, hc.scale, hc.base, n, static_cast<int>(hp.hc_sinkhorn_iters), hp.hc_eps,
                      s.pre.data() + r * n, s.post.data() + r * n, s.comb.data() + r * n * n);
      hc_collapse(X + r * nd, n, d, s.pre.data() + r * n, s.collapsed.data() + r * d);
    }
  });
}

void head_input(const model::HParams& hp, const model::HyperHeadWeights& head, const float* norm_w, const float* X,
                int R, Scratch& s, float* out, ThreadPool* pool) {
  const int n = static_cast<int>(hp.hc_count);
  const int64_t d = hp.n_embd, nd = n * d;
  if (n == 1) {
    parallel_ranges(pool, R, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) rms_norm(X + r * d, d, hp.rms_eps, norm_w, out + r * d);
    });
    return;
  }
  parallel_ranges(pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) rms_norm(X + r * nd, nd, hp.rms_eps, nullptr, s.flat.data() + r * nd);
  });
  linear(f32_weight(head.fn, n, nd), s.flat.data(), R, s.mix.data(), pool);
  parallel_ranges(pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* pre = s.pre.data() + r * n;
      hc_head_pre(s.mix.data() + r * n, head.scale, head.base, n, hp.hc_eps, pre);
      float* h = s.collapsed.data() + r * d;
      hc_collapse(X + r * nd, n, d, pre, h);
      rms_norm(h, d, hp.rms_eps, norm_w, out + r * d);
    }
  });
}

void write_block_kv(const BlockContext& c, const float* X, int R, int64_t start) {
  const model::HParams& hp = *c.hp;
  Scratch& s = *c.s;
  const int64_t d = hp.n_embd;
  hc_enter(hp, c.w->hc_attn, X, R, s, c.pool);
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      rms_norm(s.collapsed.data() + r * d, d, hp.rms_eps, c.w->attn.norm, s.xn.data() + r * d);
  });
  if (c.ds4)
    ds4_attention_write_kv(c, R, start);
  else
    attention_write_kv(c, R, start);
}

int run_block(const BlockContext& c, float* X, int R, int64_t start) {
  const model::HParams& hp = *c.hp;
  Scratch& s = *c.s;
  const int n = static_cast<int>(hp.hc_count);
  const int64_t d = hp.n_embd;

  // Attention inside its hyper-connection.
  hc_enter(hp, c.w->hc_attn, X, R, s, c.pool);
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      rms_norm(s.collapsed.data() + r * d, d, hp.rms_eps, c.w->attn.norm, s.xn.data() + r * d);
  });
  if (c.ds4)
    ds4_attention_forward(c, R, start);
  else
    attention_forward(c, R, start);
  CombineArgs ca;
  ca.d = d;
  ca.n = n;
  ca.n_tok = R;
  ca.k = 1;
  ca.routed = s.out.data();
  ca.weights = s.one.data();
  ca.post = s.post.data();
  ca.comb = s.comb.data();
  ca.x_in = X;
  ca.x_out = X;
  // A sub-layer output in s.out (attention, dense FFN) added into every stream.
  auto combine_out = [&]() {
    parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
      CombineArgs part = ca;
      part.n_tok = static_cast<int>(e - b);
      part.routed = ca.routed + b * d;
      part.weights = ca.weights + b;
      part.post = ca.post + b * n;
      part.comb = ca.comb + b * n * n;
      part.x_in = ca.x_in + b * n * d;
      part.x_out = ca.x_out + b * n * d;
      hc_combine(part);
    });
  };
  combine_out();

  // glm4moe's leading dense layers: a SwiGLU FFN instead of the MoE (n = 1, no hyper-connection).
  if (c.w->dense.present()) {
    hc_enter(hp, c.w->hc_ffn, X, R, s, c.pool);
    parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        rms_norm(s.collapsed.data() + r * d, d, hp.rms_eps, c.w->dense.norm, s.xn.data() + r * d);
    });
    dense_ffn_forward(c, R);
    combine_out();
    return R;
  }

  // MoE inside its hyper-connection; the combine forms routed + shared once per dimension.
  hc_enter(hp, c.w->hc_ffn, X, R, s, c.pool);
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      rms_norm(s.collapsed.data() + r * d, d, hp.rms_eps, c.w->moe.norm, s.xn.data() + r * d);
  });
  R = moe_forward(c, R);
  const int K = static_cast<int>(hp.n_expert_used);
  const bool has_shared = hp.ff_shared > 0;
  parallel_ranges(c.pool, R, 1, [&](int64_t b, int64_t e) {
    CombineArgs part;
    part.d = d;
    part.n = n;
    part.n_tok = static_cast<int>(e - b);
    part.k = K;
    part.routed = s.routed.data() + b * K * d;
    part.weights = s.weights.data() + b * K;
    part.shared = has_shared ? s.shared.data() + b * d : nullptr;
    // No shared-expert gate tensor (glm4moe): the shared expert is added with weight 1.
    const float* sh_gate = c.w->moe.sh_gate_inp.present() ? s.shared_gate.data() : s.one.data();
    part.shared_gate = has_shared ? sh_gate + b : nullptr;
    part.post = s.post.data() + b * n;
    part.comb = s.comb.data() + b * n * n;
    part.x_in = X + b * n * d;
    part.x_out = X + b * n * d;
    hc_combine(part);
  });
  return R;
}

}  // namespace strata::engine
