#include "strata/engine/ds4_state.h"

#include <algorithm>

namespace strata::engine {
namespace {
std::size_t z(int64_t v) { return static_cast<std::size_t>(std::max<int64_t>(v, 1)); }
}  // namespace

Ds4Scratch::Ds4Scratch(const model::HParams& hp, int max_rows, int64_t max_ctx, int n_slots) {
  const model::Ds4HParams& x = hp.ds4;
  const std::size_t R = z(max_rows);
  qa.resize(R * x.q_lora);
  iq.resize(R * z(int64_t{x.idx_heads} * x.idx_dim));
  iw.resize(R * z(x.idx_heads));
  cs.resize(R * z(hp.rope_dim));
  pick_stride = std::max<int64_t>(1, std::min<int64_t>(x.idx_top_k, max_ctx / 4 + 1));
  picks.resize(R * static_cast<std::size_t>(pick_stride));
  n_picks.resize(R);
  group_in.resize(R * hp.n_head * hp.head_dim / x.o_groups);
  group_out.resize(R * x.o_lora);
  oa.resize(R * x.o_groups * x.o_lora);
  slot_len = std::min<int64_t>(x.window, max_ctx) + max_ctx / 4 + 2;
  slot_scores.resize(z(n_slots) * static_cast<std::size_t>(slot_len));
  slot_order.resize(z(n_slots) * static_cast<std::size_t>(slot_len));
}

Ds4State::Ds4State(const model::Model& m, int64_t max_ctx, int max_rows, int n_slots)
    : cells(m.hparams(), m.ds4_attn, max_ctx),
      rope_main(static_cast<int>(m.hparams().rope_dim), m.hparams().rope_base, nullptr),
      rope_compress(static_cast<int>(m.hparams().rope_dim), m.hparams().ds4.compress_rope_base, &m.hparams().ds4.yarn),
      s(m.hparams(), max_rows, max_ctx, n_slots) {}

Ds4State::Ds4State(const model::HParams& hp, const std::vector<model::Ds4AttentionWeights>& layers, int64_t max_ctx,
                   int max_rows, int n_slots)
    : cells(hp, layers, max_ctx),
      rope_main(static_cast<int>(hp.rope_dim), hp.rope_base, nullptr),
      rope_compress(static_cast<int>(hp.rope_dim), hp.ds4.compress_rope_base, &hp.ds4.yarn),
      s(hp, max_rows, max_ctx, n_slots) {}

}  // namespace strata::engine
