#pragma once
// The speculative decode round (SPEC §2.6–§2.8): draft with the MTP chain, keep what retention allows
// verify the pending token and the kept drafts as ONE window of k+1 rows, keep what the
// verifier accepts and roll the rejected cells back. It drives an engine::DecodeTarget: an
// engine::Sequence (the one owner of a sequence's state) on any backend — CPU, metal-emu or Metal —
// or a scripted target in the tests.
//
// One round, pending token t at position p (sampled, not yet evaluated; p = target.n_past()):
//   drafting   chained: the whole chain of k steps is drafted, then retain_chained keeps a prefix;
//              non-chained: one step at a time, judged as it comes (draft_nonchained: legacy
//              append-then-stop when retention is unset, reject-before-write when it is set);
//   verify     eval [t, d_0 .. d_{n-1}] at p with every row's logits, rows >= 1 flagged as draft
//              rows; verify_window (greedy at temperature 0, exact speculative sampling above);
//   commit     rollback(p + 1 + accepted): the rejected drafts' cells go; the drafter's catch-up
//              rows were encoded by the window itself.
// No draft kept (or none fits, or the streams of p - 1 are no longer held — after a restore): a plain
// step — eval [t] at p and sample its logits; the next round can draft again.
// Adaptive rounds (opt.adaptive) first ask AdaptiveDrafts how many drafts pay this round (0 = a plain
// step) and report the measured draft, verification and plain-step times and the acceptance back. At
// temperature > 0 (SpecSample::Exact) they verify by sampling: each row draws its token as a plain step
// would and the draft is kept while it matches — the same acceptance as exact speculative sampling with
// deterministic drafts, and the same output as plain decoding with the same seed, whatever number of
// drafts the (timing-dependent) choice made.
// Buffers are sized once at construction: a round allocates nothing.
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/config/settings.h"
#include "strata/draft/adaptive.h"
#include "strata/engine/decode_target.h"
#include "strata/sampling/policy.h"
#include "strata/sampling/rng.h"
#include "strata/sampling/sample_dist.h"

namespace strata::draft {

inline constexpr int kMaxDraftSteps = 16;

struct RoundOptions {
  int max_drafts = 3;                   // k: drafts this round may verify (0 = a plain step); <= the speculator's max
  bool chained = true;                  // chained or non-chained drafting (SPEC §2.7)
  float caller_min_p = 0.0f;            // the caller's per-step floor when no schedule is set
  config::RetentionSettings retention;  // STRATA_METAL_SPEC_MIN_P_SCHEDULE / _MIN_CUM_P
  sampling::SamplingPolicy policy;
  sampling::SpecSample mode = sampling::SpecSample::Exact;
  bool adaptive = false;  // choose each round's draft count (<= max_drafts) from measured costs (adaptive.h)
  // τ of exact window cuts (STRATA_MOCE_WINDOW_CUT; 0 = off): window row r >= 1 may read experts for
  // itself only while p_0·…·p_{r-1} (the drafter's probabilities of the drafts before it) >= τ; a row
  // below that is dropped, with the rows after it, where it would read (DecodeTarget::eval_window).
  float window_cut = 0.0f;
};

struct RoundResult {
  int n_tokens = 0;  // tokens to commit: accepted drafts, then the next token
  int32_t tokens[kMaxDraftSteps + 1] = {};
  int drafted = 0;                   // drafter rows run this round
  int verified = 0;                  // drafts in the verification window (0: a plain step ran)
  int accepted = 0;                  // drafts[0..accepted) kept
  int cut = 0;                       // drafts a window cut dropped before verification (not in `verified`)
  float probs[kMaxDraftSteps] = {};  // the drafter's probability of each drafted step (drafted entries)
};

class Speculator {
 public:
  // max_drafts: 1..kMaxDraftSteps, the largest k any round asks for.
  Speculator(engine::DecodeTarget& target, int max_drafts);

  // One round for the pending token t at position target.n_past(). history: the committed tokens the
  // penalties look at, ending with t (empty when the penalties are off). The target must have a
  // drafter when opt.max_drafts > 0.
  RoundResult round(int32_t t, std::span<const int32_t> history, const RoundOptions& opt, sampling::Rng& rng);

  int max_drafts() const { return max_drafts_; }
  // Adaptive speculation's estimates and choices (rounds with opt.adaptive).
  const AdaptiveDrafts& adaptive() const { return adaptive_; }
  void seed_adaptive(const AdaptiveStats& prior) { adaptive_.seed(prior); }
  // The draft logits of the last round's drafted steps ([drafted][Vr]).
  const float* draft_logits() const { return dlogits_.data(); }

 private:
  RoundResult plain_step(int32_t t, int64_t p, std::span<const int32_t> history, const RoundOptions& opt,
                         sampling::Rng& rng);
  float draft_prob(int step, int32_t raw) const;  // softmax probability of the step's raw draft (its argmax)
  // The step's draft under the policy's repetition / presence penalties: applied to its draft logits as
  // the verifier applies them to the row that judges the draft (the last penalty_last_n tokens of history
  // ++ the chain's `drafted` earlier drafts, window_[1..]), their argmax (a model token id). drafted_token
  // (the drafter's own argmax) when the penalties are off or leave it the largest.
  int32_t penalized_draft(int step, int32_t drafted_token, std::span<const int32_t> history, int drafted,
                          const sampling::SamplingPolicy& policy);
  // The probability of `token` under softmax(logits_ row 0) at temperature 1 (greedy: the peak).
  double token_peak(int32_t token);
  static constexpr int kGreedyPeakEvery = 4;  // greedy adaptive plain steps per recorded peak

  engine::DecodeTarget& target_;
  int max_drafts_;
  int V_, Vr_;
  std::vector<float> logits_;         // [(max_drafts+1)][V] verification logits
  std::vector<float> dlogits_;        // [max_drafts][Vr] draft logits
  std::vector<int32_t> window_;       // [max_drafts+1] the window's input tokens
  std::vector<int32_t> one_;          // history fallback: [t]
  std::vector<int32_t> draft_index_;  // [V] each model token's index in the drafter's vocabulary (-1: none)
  sampling::SampleWorkspace ws_;
  AdaptiveDrafts adaptive_;
  // The start of the last adaptive round (the period between two starts holds the caller's share of a
  // round: AdaptiveDrafts::record_period).
  std::chrono::steady_clock::time_point last_start_{};
  bool have_last_start_ = false;
  int64_t greedy_plain_ = 0;  // greedy adaptive plain steps (every kGreedyPeakEvery-th records its peak)
};

}  // namespace strata::draft
