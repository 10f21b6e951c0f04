#pragma once
// Draft retention (SPEC §2.7, R-3): which drafted tokens of a round are kept for verification.
//
// Policy on (either retention setting validly set): draft step j passes iff its probability p_j is
// finite and in [0, 1] (else it fails closed), p_j >= floor_j (the schedule's value for step j, the
// last repeating, else the caller's min_p) and, if min_cum_p > 0, p_0·…·p_j >= min_cum_p (product in
// double, reset to 1 each round). Equality passes. The first failure ends the round's prefix.
// Policy off (legacy): step j fails iff p_j < min_p (so NaN passes, as the old comparison did).
//
// Paths: chained (max_steps drafts already encoded; the retention loop keeps the passing prefix) and
// non-chained (draft one step at a time, stop drafting at the first failure). Legacy non-chained
// appends the failing candidate and then stops; with the policy on, a failing candidate is rejected
// before its token or probability is written or counted, on both paths.
#include <cstdint>
#include <span>
#include <utility>

#include "strata/config/settings.h"

namespace strata::draft {

class RetentionGate {
 public:
  RetentionGate(const config::RetentionSettings& s, float caller_min_p) : s_(s), min_p_(caller_min_p) {}

  bool policy_on() const { return s_.policy_on; }
  void begin_round() { cum_ = 1.0; }
  // Judges step `step` (0-based; steps of a round in order) with draft probability p.
  bool passes(int step, float p);

 private:
  config::RetentionSettings s_;
  float min_p_;
  double cum_ = 1.0;
};

// Chained path: the whole chain was drafted; returns how many leading drafts are kept.
int retain_chained(const config::RetentionSettings& s, float caller_min_p, std::span<const float> probs);

// Non-chained path. draft_one(step) drafts the next token and returns {token, probability}; kept
// drafts are written to tokens[0..n) / probs[0..n) (spans of at least max_steps). Returns n.
template <class DraftOne>
int draft_nonchained(const config::RetentionSettings& s, float caller_min_p, int max_steps, DraftOne&& draft_one,
                     std::span<int32_t> tokens, std::span<float> probs) {
  RetentionGate gate(s, caller_min_p);
  gate.begin_round();
  int n = 0;
  for (int step = 0; step < max_steps; ++step) {
    const std::pair<int32_t, float> d = draft_one(step);
    const bool ok = gate.passes(step, d.second);
    if (!ok && gate.policy_on()) break;  // reject before writing or counting
    tokens[static_cast<size_t>(n)] = d.first;
    probs[static_cast<size_t>(n)] = d.second;
    ++n;
    if (!ok) break;  // legacy: the failing candidate was appended; stop drafting
  }
  return n;
}

}  // namespace strata::draft
