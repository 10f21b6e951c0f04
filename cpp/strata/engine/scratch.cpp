#include "strata/engine/scratch.h"

#include <algorithm>

#include "strata/engine/kv_quant.h"

namespace strata::engine {
namespace {
std::size_t z(int64_t v) { return static_cast<std::size_t>(std::max<int64_t>(v, 1)); }
}  // namespace

Scratch::Scratch(const model::HParams& hp, const ScratchShape& s) : shape(s) {
  const std::size_t R = z(s.max_rows), d = hp.n_embd, n = hp.hc_count, dh = hp.head_dim;
  const std::size_t hq = hp.n_head, E = hp.n_expert, K = hp.n_expert_used, F = hp.ff_expert;
  const std::size_t slots = z(s.n_slots);
  flat.resize(R * n * d);
  mix.resize(R * (2 + n) * n);
  pre.resize(R * n);
  post.resize(R * n);
  comb.resize(R * n * n);
  collapsed.resize(R * d);
  xn.resize(R * d);
  q.resize(R * hp.q_rows());
  k.resize(R * hp.kv_rows());
  v.resize(R * hp.kv_rows());
  qh.resize(R * hq * dh);
  att.resize(R * hq * dh);
  rope_cs.resize(R * z(hp.rope_dim));
  rope_pos.resize(R);
  std::fill(rope_pos.data(), rope_pos.data() + rope_pos.size(), int64_t{-1});
  iq.resize(R * z(static_cast<int64_t>(hp.indexer_heads) * hp.indexer_dim));
  iw.resize(R * z(hp.indexer_heads));
  ik.resize(R * z(hp.indexer_dim));
  cells.resize(R * z(s.max_list));
  n_cells.resize(R);
  head_group = static_cast<int>(std::clamp<int64_t>(hp.n_head_kv > 0 ? hp.n_head / hp.n_head_kv : 1, 1, kMaxHeadGroup));
  // At most 4 rows a pass: a verification window's size, 4x a prefill chunk's key reads saved, and the
  // score scratch (which grows with it) at most 4x.
  rows_per_pass = static_cast<int>(
      std::clamp<int64_t>(std::min<int64_t>(kMaxHeadGroup / head_group, s.max_rows), 1, kMaxRowsPerPass));
  const std::size_t G = static_cast<std::size_t>(head_group);
  slot_scores.resize(slots * G * static_cast<std::size_t>(rows_per_pass) * z(std::max(s.max_ctx, s.max_list)));
  slot_order.resize(slots * z(s.max_ctx));
  slot_chunk.resize(slots * G * dh);
  out.resize(R * d);
  one.resize(R);
  for (std::size_t i = 0; i < R; ++i) one[i] = 1.0f;
  probs.resize(R * E);
  sel.resize(hp.gating != model::Gating::Softmax ? R * E : 1);
  ids.resize(R * K);
  weights.resize(R * K);
  expert_count.resize(E);
  expert_offset.resize(E + 1);
  expert_order.resize(E);
  window_map.resize(E);
  next_probs.resize(R * E);
  next_want.resize(E);
  entries.resize(R * K);
  entry_rows.resize(R * K);
  ge.resize(R * K * F);
  ue.resize(R * K * F);
  routed.resize(R * K * d);
  const std::size_t f_side = z(std::max(hp.ff_shared, hp.ff_dense));  // shared expert or dense FFN
  sg.resize(R * f_side);
  su.resize(R * f_side);
  shared.resize(R * d);
  shared_gate.resize(R);
  h.resize(R * d);
  act_x.resize(PreparedInput::arena_bytes(static_cast<int64_t>(R), static_cast<int64_t>(d)));
  act_h.resize(R * K * F * 4);
  act_hs.resize(R * f_side * 4);
  tasks.resize(2 * E + 16);
}

std::size_t Scratch::capacity_signature() const {
  return flat.capacity() + mix.capacity() + pre.capacity() + post.capacity() + comb.capacity() + collapsed.capacity() +
         xn.capacity() + q.capacity() + k.capacity() + v.capacity() + qh.capacity() + att.capacity() +
         rope_cs.capacity() + rope_pos.capacity() + iq.capacity() + iw.capacity() + ik.capacity() + cells.capacity() +
         n_cells.capacity() + slot_scores.capacity() + slot_order.capacity() + slot_chunk.capacity() + out.capacity() +
         one.capacity() + probs.capacity() + sel.capacity() + ids.capacity() + weights.capacity() +
         expert_count.capacity() + expert_offset.capacity() + expert_order.capacity() + window_map.capacity() +
         next_probs.capacity() + next_want.capacity() + entries.capacity() + entry_rows.capacity() + ge.capacity() +
         ue.capacity() + routed.capacity() + sg.capacity() + su.capacity() + shared.capacity() +
         shared_gate.capacity() + h.capacity() + act_x.capacity() + act_h.capacity() + act_hs.capacity() +
         tasks.capacity();
}

std::size_t Scratch::bytes() const { return capacity_signature() * 4; }

}  // namespace strata::engine
