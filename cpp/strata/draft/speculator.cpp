#include "strata/draft/speculator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "strata/draft/retention.h"
#include "strata/engine/vec_dot.h"
#include "strata/sampling/verify.h"
#include "strata/util/error.h"

namespace strata::draft {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Verification by sampling (adaptive rounds at temperature > 0): row i draws its token exactly as a
// plain step would (sample_logits over history ++ drafts[0..i), one uniform) and the draft is kept
// while it equals that token. A draft is thus accepted with probability p_i(draft) — the acceptance of
// exact speculative sampling with deterministic drafts — and a rejected row's token is distributed as
// p_i without the draft, as there. Every committed token consumes one uniform in order, as plain
// decoding does, so the output equals plain decoding's with the same seed whatever number of drafts a
// round chose (adaptive choices depend on measured times; the text must not).
sampling::VerifyResult verify_by_sampling(const float* logits, int V, std::span<const int32_t> drafts,
                                          const sampling::SamplingPolicy& policy, std::span<const int32_t> history,
                                          sampling::Rng& rng, sampling::SampleWorkspace& ws) {
  sampling::VerifyResult v;
  const int n = static_cast<int>(drafts.size());
  for (int i = 0; i <= n; ++i) {
    const int32_t tok = sampling::sample_logits(logits + static_cast<std::size_t>(i) * static_cast<std::size_t>(V), V,
                                                policy, history, drafts.first(static_cast<std::size_t>(i)), rng, ws);
    if (i == n || tok != drafts[static_cast<std::size_t>(i)]) {
      v.accepted = i;
      v.next_token = tok;
      return v;
    }
  }
  return v;  // unreachable: row n always returns
}

// When `off`, turns the target's drafter encoding off for its scope (back on also when a step throws).
struct EncodingOffGuard {
  engine::DecodeTarget& target;
  bool off;
  EncodingOffGuard(engine::DecodeTarget& t, bool turn_off) : target(t), off(turn_off) {
    if (off) target.set_drafter_encoding(false);
  }
  EncodingOffGuard(const EncodingOffGuard&) = delete;
  EncodingOffGuard& operator=(const EncodingOffGuard&) = delete;
  ~EncodingOffGuard() {
    if (off) target.set_drafter_encoding(true);
  }
};

// The first window row (1..n) that may be cut: the first whose chance of being needed, the product of
// the drafter's probabilities of the drafts before it, is below tau; n + 1 = none (tau <= 0: cuts off).
int window_cut_row(float tau, const float* probs, int n) {
  if (tau <= 0.0f) return n + 1;
  double chance = 1.0;
  for (int r = 1; r <= n; ++r) {
    chance *= static_cast<double>(probs[r - 1]);
    if (chance < static_cast<double>(tau)) return r;
  }
  return n + 1;
}

}  // namespace

Speculator::Speculator(engine::DecodeTarget& target, int max_drafts)
    : target_(target),
      max_drafts_(max_drafts),
      V_(target.n_vocab()),
      Vr_(target.draft_vocab()),
      adaptive_(std::clamp(max_drafts, 1, kMaxDraftSteps), /*skip_cold_samples=*/true) {
  if (max_drafts < 1 || max_drafts > kMaxDraftSteps)
    throw_error(ErrorKind::Value, "speculator: max_drafts " + std::to_string(max_drafts) + " is outside [1, " +
                                      std::to_string(kMaxDraftSteps) + "]");
  logits_.resize(static_cast<std::size_t>(max_drafts + 1) * static_cast<std::size_t>(V_));
  dlogits_.resize(static_cast<std::size_t>(max_drafts) * static_cast<std::size_t>(std::max(Vr_, 1)));
  window_.resize(static_cast<std::size_t>(max_drafts + 1));
  one_.resize(1);
  draft_index_.assign(static_cast<std::size_t>(std::max(V_, 1)), -1);
  if (const int32_t* ids = Vr_ > 0 ? target.draft_vocab_ids() : nullptr)
    for (int i = 0; i < Vr_; ++i)
      if (ids[i] >= 0 && ids[i] < V_) draft_index_[static_cast<std::size_t>(ids[i])] = i;
}

int32_t Speculator::penalized_draft(int step, int32_t drafted_token, std::span<const int32_t> history, int drafted,
                                    const sampling::SamplingPolicy& policy) {
  // Code repeats its tokens, and the default policy's repetition penalty (1.15 over the last 128) pushes
  // the target's choice off a token the text just used, where the drafter, which never sees the penalty,
  // keeps proposing it. Any deterministic draft leaves the output exact (its acceptance is the
  // verifier's), so the draft is chosen as the verifier will judge it: the sampler's own penalties, over
  // the same tokens (history ++ the chain's earlier drafts), on the drafter's vocabulary.
  if (!sampling::penalties_apply(policy)) return drafted_token;
  float* l = dlogits_.data() + static_cast<std::size_t>(step) * static_cast<std::size_t>(Vr_);
  const std::span<const int32_t> inputs(window_.data() + 1, static_cast<std::size_t>(drafted));
  const int32_t own =
      drafted_token >= 0 && drafted_token < V_ ? draft_index_[static_cast<std::size_t>(drafted_token)] : -1;
  bool own_penalized = false;
  for (const int32_t t : sampling::penalized_tokens(V_, policy, history, inputs, ws_)) {
    const int32_t i = draft_index_[static_cast<std::size_t>(t)];
    if (i < 0) continue;  // outside the drafter's vocabulary
    l[i] = static_cast<float>(sampling::penalized_logit(static_cast<double>(l[i]), policy));
    own_penalized = own_penalized || i == own;
  }
  // A penalty of at least 1 and a presence penalty of at least 0 only lower logits: while the drafter's own
  // draft was not penalised it is still the largest (a penalty below 1 raises the tokens seen).
  if (own >= 0 && !own_penalized && policy.repetition_penalty >= 1.0f && policy.presence_penalty >= 0.0f)
    return drafted_token;
  return target_.draft_vocab_ids()[sampling::argmax(l, Vr_)];
}

float Speculator::draft_prob(int step, int32_t raw) const {
  // The softmax probability of the step's argmax, the raw draft (DecodeTarget::draft_step returns it):
  // 1 / Σ exp(l − l[raw]), the normaliser in one VecKernels::exp_sum pass (the engine's exp_f32, bitwise the
  // same on every ISA; nothing stored). Its logit is the maximum, so no pass looks for it again. With std::exp
  // in double this was ~40 % of a draft step on the demo model (4096 exponentials per step).
  const float* l = dlogits_.data() + static_cast<std::size_t>(step) * static_cast<std::size_t>(Vr_);
  const int32_t i = raw >= 0 && raw < V_ ? draft_index_[static_cast<std::size_t>(raw)] : -1;
  if (i < 0)
    throw_error(ErrorKind::Internal,
                "speculator: the drafter returned token " + std::to_string(raw) + ", outside its vocabulary");
  const float mx = l[i];
  return static_cast<float>(1.0 / static_cast<double>(engine::vec_kernels().exp_sum(l, Vr_, mx)));
}

double Speculator::token_peak(int32_t token) {
  // A predictor only (the peak trigger, adaptive.h): the chosen token's probability under the softmax of the
  // logits at temperature 1 (the greedy token: the peak). Against the token's own logit no maximum pass is
  // needed (a larger logit only makes the probability smaller); the normaliser is one VecKernels::exp_sum
  // pass that stores nothing (3.6 us on the demo row, where writing the 8192 exponentials and summing them
  // in a second pass took 5.5).
  const float* l = logits_.data();
  const float top = l[token];
  if (!std::isfinite(top)) return 1.0;
  const double z = engine::vec_kernels().exp_sum(l, V_, top);
  return z >= 1.0 ? 1.0 / z : 1.0;
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
  int k = static_cast<int>(std::min<int64_t>(opt.max_drafts, target_.max_ctx() - 1 - p));
  if (k < 1 || p < 1 || !target_.has_drafter() || !target_.draft_ready(p - 1)) {
    have_last_start_ = false;  // a step outside the economics: no period to attribute
    // Adaptive: a round with no room to draft (a call's last token, the context's end) skips the drafter's
    // K/V as a plain stretch does. Encoding its row would first encode every row the stretch before it
    // kept (up to 16: ~0.5 ms on the demo model, at the end of every call); a later draft round catches up.
    const EncodingOffGuard guard{target_, opt.adaptive && k < 1 && target_.has_drafter()};
    return plain_step(t, p, history, opt, rng);
  }
  const bool adaptive = opt.adaptive;
  if (adaptive) {
    const auto start = std::chrono::steady_clock::now();
    if (have_last_start_) adaptive_.record_period(std::chrono::duration<double>(start - last_start_).count());
    last_start_ = start;
    have_last_start_ = true;
  }
  // Adaptive, chained: one draft past the chosen count is drafted but not verified. When every
  // verified draft is accepted, the token the window commits after them is exactly what that draft
  // had to be (greedy: the row's argmax; by sampling: the row's sampled token), so the acceptance of
  // the next step is observed for one draft step instead of a verification row. Without it a step the
  // economics stops choosing would keep the estimate that made it stop (e.g. the warm-up's first rounds).
  // Only while that step has few judged drafts (AdaptiveDrafts::shadow_wanted): it costs a draft step.
  bool shadow = false;
  const bool by_sampling = opt.policy.temperature > 0.0f && opt.mode == sampling::SpecSample::Exact;
  if (adaptive) {
    const int k_cap = k;  // what fits this round
    adaptive_.peak_context(by_sampling ? static_cast<double>(opt.policy.temperature) : 0.0);
    k = adaptive_.choose(k_cap);
    shadow = opt.chained && k > 0 && k < k_cap && !adaptive_.probing() && adaptive_.shadow_wanted(k);
    if (k == 0) {
      // In a plain stretch the step skips the drafter's K/V (a gap the drafter's cells handle).
      const bool encode = adaptive_.encode_plain();
      const EncodingOffGuard guard{target_, !encode};
      const auto t0 = std::chrono::steady_clock::now();
      RoundResult plain = plain_step(t, p, history, opt, rng);
      adaptive_.record_plain(seconds_since(t0), encode);
      // The bound on a draft's acceptance at this row: its distribution's peak where verification would be by
      // sampling. Where it would be greedy the peak at temperature 1 predicts the drafter's agreement instead
      // (the peak trigger), recorded every kGreedyPeakEvery-th step: one exp_sum pass over 8192 logits takes
      // ~3.6 us, under 1 % of a demo-model step, and a quarter of them is enough to see a text turn predictable.
      if (by_sampling)
        adaptive_.record_peak(ws_.peak);
      else if (++greedy_plain_ % kGreedyPeakEvery == 0)
        adaptive_.record_peak(token_peak(plain.tokens[0]));
      adaptive_.record_round(0, 0, plain.n_tokens);
      return plain;
    }
  }

  // Drafting: the chain starts at the last committed row p - 1 with next token t. Rows the plain steps
  // before it did not encode are encoded first in one batch (Sequence::encode_pending), outside the
  // draft step's timing: once per return from a plain stretch, not a cost of every draft step.
  target_.catch_up_drafter(p - 1);
  RoundResult r;
  auto t0 = std::chrono::steady_clock::now();
  target_.draft_begin(p - 1, t);
  int n = 0;
  if (opt.chained) {
    const int chosen = k;
    if (shadow) ++k;
    for (int j = 0; j < k; ++j) {
      const int32_t raw =
          target_.draft_step(dlogits_.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(Vr_));
      const int32_t d = penalized_draft(j, raw, history, j, opt.policy);
      if (d != raw) target_.set_draft_token(d);
      window_[static_cast<std::size_t>(j + 1)] = d;
      r.probs[j] = draft_prob(j, raw);
    }
    r.drafted = k;
    n = retain_chained(opt.retention, opt.caller_min_p, std::span<const float>(r.probs, static_cast<std::size_t>(k)));
    shadow = shadow && n == k;  // the extra draft counts only where retention would have kept it
    n = std::min(n, chosen);
  } else {
    auto draft_one = [&](int step) {
      const int32_t raw =
          target_.draft_step(dlogits_.data() + static_cast<std::size_t>(step) * static_cast<std::size_t>(Vr_));
      // draft_nonchained writes each kept draft to window_[1 + step] before the next step.
      const int32_t d = penalized_draft(step, raw, history, step, opt.policy);
      if (d != raw) target_.set_draft_token(d);
      ++r.drafted;
      return std::pair<int32_t, float>(d, draft_prob(step, raw));
    };
    n = draft_nonchained(opt.retention, opt.caller_min_p, k, draft_one,
                         std::span<int32_t>(window_.data() + 1, static_cast<std::size_t>(k)),
                         std::span<float>(r.probs, static_cast<std::size_t>(k)));
  }
  if (adaptive) adaptive_.record_draft(r.drafted, seconds_since(t0));
  if (n == 0) {
    t0 = std::chrono::steady_clock::now();
    RoundResult plain = plain_step(t, p, history, opt, rng);
    if (adaptive) {
      adaptive_.record_plain(seconds_since(t0), true);
      adaptive_.record_round(0, 0, plain.n_tokens);
    }
    plain.drafted = r.drafted;
    return plain;
  }

  // Verification: ONE window of n + 1 rows; rows >= 1 are draft rows. With window cuts the
  // target may run fewer rows (the first m): the drafts of the rows it dropped are not verified, as if
  // the round had drafted m - 1. Rows are causal, so the kept rows' logits are those of the whole
  // window; the cut depends on the rows' routing, never on the verification's random draws, so the
  // output is plain decoding's whatever it cuts (deterministic drafts, as above).
  window_[0] = t;
  t0 = std::chrono::steady_clock::now();
  const int cut_from = window_cut_row(opt.window_cut, r.probs, n);  // n + 1: no row may be cut
  const int nv = static_cast<int>(target_.eval_window(window_.data(), n + 1, p, logits_.data(), 1, cut_from)) - 1;
  r.cut = n - nv;
  one_[0] = t;
  const std::span<const int32_t> hist = history.empty() ? std::span<const int32_t>(one_) : history;
  const std::span<const int32_t> drafts(window_.data() + 1, static_cast<std::size_t>(nv));
  const sampling::VerifyResult v =
      adaptive && by_sampling
          ? verify_by_sampling(logits_.data(), V_, drafts, opt.policy, hist, rng, ws_)
          : sampling::verify_window(logits_.data(), V_, drafts, opt.policy, opt.mode, hist, rng, ws_);
  // Commit: the accepted rows stay, the rejected drafts' cells go.
  target_.rollback(p + 1 + v.accepted);
  r.verified = nv;
  r.accepted = v.accepted;
  for (int j = 0; j < v.accepted; ++j) r.tokens[j] = drafts[static_cast<std::size_t>(j)];
  r.tokens[v.accepted] = v.next_token;
  r.n_tokens = v.accepted + 1;
  if (adaptive) {
    // A cut window is timed and counted as the window asked for (n drafts): its dropped drafts count as
    // rejected, so the economics see what the cuts cost in tokens per round.
    adaptive_.record_verify(n + 1, seconds_since(t0));  // the window, its verification and the rollback
    // The shadow draft (window_[n + 1], never evaluated) is judged when every verified draft passed.
    if (shadow && v.accepted == n) {
      const bool passed = window_[static_cast<std::size_t>(n + 1)] == v.next_token;
      adaptive_.record_round(n + 1, n + (passed ? 1 : 0), r.n_tokens);
    } else {
      adaptive_.record_round(n, v.accepted, r.n_tokens);
    }
  }
  return r;
}

}  // namespace strata::draft
