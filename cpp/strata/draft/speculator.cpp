#include "strata/draft/speculator.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "strata/draft/retention.h"
#include "strata/sampling/verify.h"
#include "strata/util/error.h"

namespace strata::draft {

Speculator::Speculator(engine::DecodeTarget& target, int max_drafts)
    : target_(target), max_drafts_(max_drafts), V_(target.n_vocab()), Vr_(target.draft_vocab()) {
  if (max_drafts < 1 || max_drafts > kMaxDraftSteps)
    throw_error(ErrorKind::Value, "speculator: max_drafts " + std::to_string(max_drafts) + " is outside [1, " +
                                      std::to_string(kMaxDraftSteps) + "]");
  logits_.resize(static_cast<std::size_t>(max_drafts + 1) * static_cast<std::size_t>(V_));
  dlogits_.resize(static_cast<std::size_t>(max_drafts) * static_cast<std::size_t>(std::max(Vr_, 1)));
  window_.resize(static_cast<std::size_t>(max_drafts + 1));
  one_.resize(1);
}

float Speculator::draft_prob(int step) const {
  // The softmax probability of the step's argmax (its draft), in double.
  const float* l = dlogits_.data() + static_cast<std::size_t>(step) * static_cast<std::size_t>(Vr_);
  float mx = l[0];
  for (int i = 1; i < Vr_; ++i) mx = std::max(mx, l[i]);
  double z = 0.0;
  for (int i = 0; i < Vr_; ++i) z += std::exp(static_cast<double>(l[i]) - static_cast<double>(mx));
  return static_cast<float>(1.0 / z);
}

RoundResult Speculator::plain_step(int32_t t, int64_t p, std::span<const int32_t> history, const RoundOptions& opt,
                                   sampling::Rng& rng) {
  RoundResult r;
  target_.eval(&t, 1, p, engine::LogitRows::Last, logits_.data(), -1);
  r.tokens[0] = sampling::sample_logits(logits_.data(), V_, opt.policy, history, {}, rng, ws_);
  r.n_tokens = 1;
  return r;
}

RoundResult Speculator::round(int32_t t, std::span<const int32_t> history, const RoundOptions& opt,
                              sampling::Rng& rng) {
  const int64_t p = target_.n_past();
  if (opt.max_drafts < 0 || opt.max_drafts > max_drafts_)
    throw_error(ErrorKind::Value, "speculator: a round of " + std::to_string(opt.max_drafts) +
                                      " drafts (this speculator holds at most " + std::to_string(max_drafts_) + ")");
  // Drafts fit when every window row has a cell: positions p .. p + k.
  const int k = static_cast<int>(std::min<int64_t>(opt.max_drafts, target_.max_ctx() - 1 - p));
  if (k < 1 || p < 1 || !target_.has_drafter() || !target_.draft_ready(p - 1))
    return plain_step(t, p, history, opt, rng);

  // Drafting: the chain starts at the last committed row p - 1 with next token t.
  RoundResult r;
  target_.draft_begin(p - 1, t);
  int n = 0;
  if (opt.chained) {
    for (int j = 0; j < k; ++j) {
      window_[static_cast<std::size_t>(j + 1)] =
          target_.draft_step(dlogits_.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(Vr_));
      r.probs[j] = draft_prob(j);
    }
    r.drafted = k;
    n = retain_chained(opt.retention, opt.caller_min_p, std::span<const float>(r.probs, static_cast<std::size_t>(k)));
  } else {
    auto draft_one = [&](int step) {
      const int32_t d =
          target_.draft_step(dlogits_.data() + static_cast<std::size_t>(step) * static_cast<std::size_t>(Vr_));
      ++r.drafted;
      return std::pair<int32_t, float>(d, draft_prob(step));
    };
    n = draft_nonchained(opt.retention, opt.caller_min_p, k, draft_one,
                         std::span<int32_t>(window_.data() + 1, static_cast<std::size_t>(k)),
                         std::span<float>(r.probs, static_cast<std::size_t>(k)));
  }
  if (n == 0) {
    RoundResult plain = plain_step(t, p, history, opt, rng);
    plain.drafted = r.drafted;
    return plain;
  }

  // Verification: ONE window of n + 1 rows; rows >= 1 are draft rows.
  window_[0] = t;
  target_.eval(window_.data(), n + 1, p, engine::LogitRows::All, logits_.data(), 1);
  one_[0] = t;
  const std::span<const int32_t> hist = history.empty() ? std::span<const int32_t>(one_) : history;
  const std::span<const int32_t> drafts(window_.data() + 1, static_cast<std::size_t>(n));
  const sampling::VerifyResult v = sampling::verify_window(logits_.data(), V_, drafts, opt.policy, opt.mode, hist, rng, ws_);
  // Commit: the accepted rows stay, the rejected drafts' cells go.
  target_.rollback(p + 1 + v.accepted);
  r.verified = n;
  r.accepted = v.accepted;
  for (int j = 0; j < v.accepted; ++j) r.tokens[j] = drafts[static_cast<std::size_t>(j)];
  r.tokens[v.accepted] = v.next_token;
  r.n_tokens = v.accepted + 1;
  return r;
}

}  // namespace strata::draft
