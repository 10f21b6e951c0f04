#pragma once
// Adaptive speculation: how many drafts a round should verify, chosen from costs and acceptance
// measured while running (the retention economics of docs/retention-economics.md applied live).
//
// A round that verifies n drafts commits, in expectation, R_n = 1 + Σ_{i<n} A_i tokens, where
// A_i = a_0·…·a_i is the chance that drafts 0..i are all accepted and a_j the live acceptance of
// draft step j given that the drafts before it were accepted. It costs C_n = s_n·c_draft + c_verify(n+1)
// + o seconds: c_draft the measured time of one draft step (s_n = n + 1 draft steps when n < k, the
// speculator's shadow draft included whether or not the round drafts it, else n), c_verify(m) that of a verification
// window of m rows (c_verify(1) is a plain step), o the per-round overhead below. Each round picks the n in 0..k that
// maximises R_n / C_n (n = 0: a plain step, 1 token for c_verify(1)).
//
// Estimates: every time is the median of its last 8 samples (RecentMedian) (robust to a cold first call and to
// other processes taking the cores for a moment); acceptance counts decay by 0.97 per observed round
// with a prior of one half-accepted draft per step. Probe: rounds 0 and 1 verify one draft each, round 2
// is a plain step without the drafter's encoding (c_plain); with skip_cold_samples (the speculator's
// setting) rounds 0-2 draft and round 3 is the plain step, the first round's costs not being samples. Hopeless: when
// even perfect acceptance would not pay (C_n >= (n + 1)·c_plain for every n, n drafts committing at most n + 1 tokens;
// sizes not yet measured extrapolated), as on a small cache-resident model where every window row costs a whole step,
// there is no warm-up and exploration runs at its longest interval. Viable: a draft count n that could pay at all,
// n·c_draft + c_verify(n + 1) + o < (n + 1)·(c_plain + o), each time at its fastest recent sample (noise only ever adds
// time, and a session's first draft step and first window are slower than the rest — measured on the demo model: 0.67
// ms against 0.1-0.25 ms, and 1.9 ms against 1.1-1.4 ms — so one probe round alone made drafting look hopeless where it
// pays; unmeasured sizes extrapolated as below). The warm-up runs plain steps in place of counts that are not viable,
// and exploration skips them unless none is viable (hopeless: then every count stays explored, at the longest interval,
// so costs measured under a passing load cannot rule drafting out for good). Otherwise the warm-up rounds cycle n = k,
// k-1, .., 0 (kWarmupPasses times) so every window size 1..k+1 and the draft step have measurements; the hopeless test
// runs again before each pass (a noisy probe ends it later). Exploration: every interval-th round runs the draft count
// chosen longest ago instead of the best one, so every size's cost and every step's acceptance stay live when the load,
// the context length or the text change. The interval starts at kExploreEvery and doubles (up to kExploreMax) each time
// the choice after an exploring round is the same as before it (straight to kExploreMax when drafting
// is hopeless), back to kExploreEvery when it changes.
//
// The probe's plain step runs without the drafter's encoding, so c_plain is measured from the start. Plain steps after
// the warm-up skip the drafter's K/V encoding too (encode_plain() false; on the demo model that encoding is a fifth of
// a step) unless they explore: the target keeps those rows' streams and encodes the most recent ones in one batch
// before the next draft round (DecodeTarget::catch_up_drafter), so an exploring or returning draft round reads a run of
// recent cells and its acceptance is the drafter's, not that of a drafter with no memory. A plain step without that
// encoding is timed separately (c_plain); when measured it is the cost of n = 0 and the baseline of the gains, since it
// is what decoding without a drafter costs.
//
// Streaks: an exploring round that paid for itself (its tokens at C_0 each took at least its seconds) is followed by
// another exploring round with as many drafts (one more when all of them were accepted), while that count is viable and
// the economics still choose plain steps, up to kStreakMax in a row. Exploration adds one acceptance observation per
// interval, and the estimate's memory (kDecay per observed round) still holds the warm-up's, so a text that turned
// predictable later (code that settles into a pattern) stayed priced at the warm-up's acceptance for hundreds of
// rounds. A streak costs nothing while its rounds pay and ends at the first that does not; once the economics choose
// drafting, regular rounds take over.
//
// Exploration budget: while plain steps are the regular choice and drafting is not hopeless, the interval is at most
// the one that keeps what exploring rounds lose, as the economics price it ((C_n - R_n·C_0) / C_0 plain steps for the
// n it would run), within kExploreBudget of the time: on a memory-bound model, where a window costs about one step and
// an exploring round loses almost nothing, every kExploreMin rounds, so drafting resumes a few rounds after the text
// allows it instead of after 32-256 (measured on a 2 GiB model derived from the demo: seeded sessions started with
// unpredictable text, the guard stopped drafting, and the next exploring rounds came at rounds 31 and 95); on the demo
// model, where an exploring round loses about one plain step, the doubling intervals are the shorter. Each viable count
// has its own such interval for an equal share of the budget; exploring rounds come every shortest one and run the
// count most overdue against its own, so under expert streaming (a 2-row window about 1.4 plain steps, a 4-row one
// 2.5) one draft is explored every ten or so rounds and three drafts rarely (counts equally overdue, as at a seeded
// session's first exploring round: the largest under greedy verification, the cheapest under sampling). After a
// session's first exploring round the budget also caps exploration: intervals may then grow past the doubling ones (up
// to kExploreMax), and each count's loss adds what exploring rounds measured beyond their pricing (explore_extra_: an
// exploring round's whole period, from its start to the next round's, less its C_n — the drafter's catch-up encoding,
// which is not timed as a draft step, and a process's cold first windows). On the demo model at temperature 0.7 the
// doubling intervals explored at rounds 31, 95 and 223, each losing 2-4 plain steps where the economics priced about
// one (3 % of the time against the 1 % budget); now the round after the first exploration comes a budget interval
// later.
//
// Shadow drafts: a chained round of n < k drafts may draft one more that it does not verify; when the n drafts
// all pass, the token the window commits judges it, so step n's acceptance is observed for a draft step (~0.2
// plain steps on the demo model) instead of a window row. It is drafted only while step n has fewer than
// kShadowReach judged drafts in the decayed counts (the decay brings it back every ten or so rounds while n
// stays the choice; rounds that verify n + 1 drafts observe step n themselves), and priced in every round of
// n < k drafts: the price stays the one the economics were tuned with, and such a round costs at most it.
// Priced only where drafted, one draft became cheap enough that seeded sessions drafted one draft a round from
// their prior's acceptance: on code, where three drafts pay best, auto fell from 1.36x to 1.31x of plain
// decoding (and 1.20x to 1.12x on two threads), while story text, where one draft a round is the only count
// that could pay, came out 0.98-1.05x (an early rejected draft or not) against 0.97-0.98x.
//
// Per-round overhead: what a round costs outside the parts timed above — the caller's sampling bookkeeping,
// detokenizing and streaming the text, the call itself (record_period: the seconds from one round's start to the next
// minus the previous round's timed seconds, sampled after rounds that committed one token so the caller's per-token
// work is counted once). Every round pays it once whatever it commits, so C_n includes it: a round of n drafts shares
// it among its tokens. Measured through the Python API on the demo model: 0.06–0.08 ms a round against a 0.6–0.7 ms
// step. Periods much longer than a round (the caller paused between requests) are not overhead and are dropped.
//
// Peak bound: with verification by sampling (temperature > 0, the exact rule) a draft of a row is accepted with the
// target's probability of it, which is at most the peak (largest) probability p_max of that row's sampling
// distribution. Plain steps record p_max (1 where verification is greedy, so the bound then says nothing; a change of
// temperature or rule clears them, peak_context); over the last kPeakWindow of them, the mean of p_max products over
// i + 1 consecutive rows stands for A_i of a drafter that always drafted the target's most likely token: for the first
// draft a bound in expectation, for later ones an estimate (the rows are the sampled text's, not the drafts'). When not
// even that R_n = 1 + Σ A_i could pay for any count (the viability test above with R_n for n + 1), an exploring round
// that comes due while plain steps rule is held back (it stays due and is asked again the next round): it would most
// likely measure an acceptance too low to draft. The demo model at temperature 0.7: p_max averages ~0.7, its products
// give R_3 ≈ 2.6, and 3 drafts need ~3 (a 4-row window about two plain steps); an exploring round there costs ~1-2
// ms. Exploration resumes as soon as the text's peaks rise (code, a repetition), and a session the costs alone call
// hopeless keeps exploring as before.
//
// Peak trigger: where verification is greedy (temperature 0) the peaks are no bound, but the target's own
// confidence predicts the drafter's agreement: plain steps then record the greedy token's probability under
// the logits' softmax at temperature 1 (every fourth step: one exp_sum pass, 3.6 us on the demo row), and
// the same products give the R_n a drafter agreeing at those rates would reach. When that R_n / C_n beats
// plain steps (kTriggerGain) for a viable count while plain steps rule, a trial of kTrialRounds exploring
// rounds with that count runs now instead of at the exploration interval: a text that turns predictable after
// its first rounds (code settling into a pattern) stayed priced at those rounds' acceptance, and with one
// exploring round every 32-256 rounds a 256-token call never drafted where `on` gained 14 % (measured on the
// demo model: windows of 32 rows at a mean peak of 0.85-0.93 had the drafter agreeing 0.94-1.0; story text at
// 0.43-0.54, 0.66-0.84). The trial is judged on its rounds together: when they paid, the streak (above) goes
// on; when not, the trigger's interval doubles (kTriggerEvery .. kExploreMax). With sampling the peaks stay a
// bound only: a draft is accepted with at most the peak, which promises nothing to explore on.
//
// Realized-gain guard: the economics rest on medians of each cost, and a round's real cost can differ from their sum (a
// cold first window, a stale c_plain measured in a slow moment, caches the drafter's reads disturb). So the regular
// rounds that drafted (not the warm-up's or exploration's, which are meant to be suboptimal) are also measured as a
// whole: tokens committed over their seconds (drafting, verification and any plain step they fell back to), decayed by
// kGuardDecay per such round. Once they weigh at least kGuardMinRounds and committed fewer tokens per second than plain
// steps do (1 / c_plain), the regular rounds run plain steps for one exploration interval; then the guard forgets and
// drafting, if the economics still choose it, is measured afresh (so a loss costs a few rounds per interval).
//
// Acceptance prior: each step's acceptance is a decayed count of judged and accepted drafts plus a prior of
// kPriorReach pseudo-drafts at kPriorAccept (one draft, half accepted). A seed may carry the acceptance that
// earlier runs with the same settings measured, per verification context (greedy, or sampling at a
// temperature: AcceptPrior); the context a round runs in (peak_context) picks the matching one, which then
// stands in as kSeedPriorReach pseudo-drafts at that pooled rate. The costs are seeded, and the acceptance
// was not: a seeded session priced drafting at one half until its first exploring round, 32 rounds in, and
// a text that turned predictable later (the demo model's story prompt at temperature 0 falls into a loop
// after ~30 tokens) stayed at what that one round saw, with `on` 1.26x faster than plain decoding and auto
// at 0.98x. Under a seeded prior, observed counts also decay by kPlainDecay per plain step, so evidence
// gathered before a plain stretch weighs less the longer ago it was and the estimate returns toward the
// measured prior: a regular drafting round comes back on its own where the prior says drafting pays, and
// fresh evidence decides. (Toward the default prior, which no run measured, counts do not decay in plain
// steps; a step the seed has no rate for keeps the default prior.) The price: on a text that accepts
// less than the pooled prior says, such a round returns every few dozen plain steps while the prior says
// drafting pays — one round losing about half a plain step per 35-60 rounds on the demo model, ~1 % of
// the time beside the exploration budget; the realized-gain guard does not see single rounds.
// Everything is sized at construction: choosing allocates nothing.
#include <array>
#include <cstdint>

namespace strata::draft {

inline constexpr int kAdaptiveMaxDrafts = 16;  // = kMaxDraftSteps (speculator.h)

// The acceptance earlier runs measured in one verification context (adaptive.h, "Acceptance prior").
struct AcceptPrior {
  double key = -1.0;                                // peak_context's key: 0 greedy, else the temperature; -1 unused
  std::array<double, kAdaptiveMaxDrafts> accept{};  // per draft step, in [0, 1]; < 0: none measured for that step
};
inline constexpr int kMaxAcceptPriors = 4;

// A snapshot for stats: what the policy believes and what it chose.
struct AdaptiveStats {
  int max_drafts = 0;
  int64_t rounds = 0;
  std::array<int64_t, kAdaptiveMaxDrafts + 1> chosen{};  // rounds that chose n drafts (before retention)
  // Costs: the median of the session's own recent samples, or the seed's value while it has none.
  std::array<double, kAdaptiveMaxDrafts + 2> verify_s{};  // c_verify(m), m = 1..k+1 (index m); 0 = unmeasured
  double draft_step_s = 0.0;                              // c_draft
  double overhead_s = 0.0;                                // per-round overhead outside the timed parts (0 = none yet)
  double plain_s = 0.0;                                   // c_plain (0 = unmeasured)
  std::array<double, kAdaptiveMaxDrafts> accept{};        // a_j, j = 0..k-1
  // Expected speed-up over plain decoding of the chosen rounds: mean over rounds of
  // (R_n / C_n) · base, base = c_plain when measured, else c_verify(1), as estimated at the choice.
  double estimated_gain = 0.0;
  // Measured: tokens committed per second of the rounds' drafting, verification and plain steps, times
  // the current base (so 1.0 = plain decoding's speed as measured inside the same run).
  double measured_gain = 0.0;
  bool seeded = false;  // started from an earlier run's costs (AdaptiveDrafts::seed)
  int64_t guarded = 0;  // regular rounds whose draft count the realized-gain guard replaced by a plain step
  // The mean peak probability of the recent plain steps' sampling distributions (0 = none recorded), and
  // the rounds in which the peak bound held a due exploring round back (it stays due: asked again next round).
  double peak = 0.0;
  int64_t peak_held = 0;
  int64_t peak_triggered = 0;  // exploring rounds the peak trigger brought forward (greedy verification)
  // Samples this session measured itself (seeds not counted): a cost with none is only the seed's, and
  // the cost cache must not store it as this run's measurement (a seed nobody re-measures never ages out).
  std::array<int64_t, kAdaptiveMaxDrafts + 2> verify_samples{};  // [m] windows of m rows
  int64_t draft_samples = 0;
  int64_t plain_samples = 0;
  // This session's judged and accepted drafts per step (not decayed; shadow drafts included), all in the
  // verification context accept_key (-1: no round verified yet): what the cost cache pools into priors.
  double accept_key = -1.0;
  std::array<int64_t, kAdaptiveMaxDrafts> judged{};
  std::array<int64_t, kAdaptiveMaxDrafts> accepted{};
  // The acceptance prior in force per step: the seeded rate, or -1 where the default (one half) applies.
  std::array<double, kAdaptiveMaxDrafts> accept_prior{};
  // A seed's acceptance priors (seed() reads them; stats() leaves them empty).
  std::array<AcceptPrior, kMaxAcceptPriors> accept_priors{};
};

// The median of the last kRecent samples of a time (0 before any).
class RecentMedian {
 public:
  static constexpr int kRecent = 8;
  void add(double x);
  // From the sorted copy: the middle sample, or the mean of the middle two (0 before any).
  double value() const {
    if (n_ == 0) return 0.0;
    const auto mid = static_cast<std::size_t>(n_ / 2);
    return n_ % 2 == 1 ? sorted_[mid] : 0.5 * (sorted_[mid] + sorted_[mid - 1]);
  }
  double min() const { return sorted_[0]; }  // the fastest of the last kRecent samples (0 before any)
  bool empty() const { return n_ == 0; }

 private:
  std::array<double, kRecent> buf_{};     // the ring of the last n_ samples
  std::array<double, kRecent> sorted_{};  // the same samples in ascending order
  int n_ = 0, next_ = 0;
};

class AdaptiveDrafts {
 public:
  static constexpr int kProbeRounds = 3;
  static constexpr int kWarmupPasses = 2;
  static constexpr int kExploreEvery = 32;
  static constexpr int kExploreMax = 256;
  static constexpr int kStreakMax = 16;           // exploring rounds in a row while every draft is accepted
  static constexpr int kExploreMin = 4;           // the shortest interval (exploring costs nothing)
  static constexpr double kExploreBudget = 0.01;  // plain-step time exploring may lose while plain steps rule
  static constexpr double kGuardDecay = 0.9;      // per drafting round: about the last ten weigh
  static constexpr double kGuardMinRounds = 3.0;  // decayed drafting rounds before the guard may act
  static constexpr int kGuardSkipRounds = 8;      // a session's first rounds, which the guard does not judge
  static constexpr int kPeakWindow = 32;          // plain-step peaks the peak bound looks at
  static constexpr int kPeakMin = 16;             // peaks before the bound applies
  static constexpr int kTriggerEvery = 32;        // the peak trigger's shortest interval (rounds)
  static constexpr double kTriggerGain = 1.0;     // predicted speed-up over plain steps that triggers
  static constexpr int kTrialRounds = 6;          // exploring rounds a trigger runs before they are judged
  static constexpr double kShadowReach = 3.0;     // judged drafts of a step below which a round shadows it
  static constexpr int kSeedSamples = 3;          // recent samples a seeded cost counts as (seed())
  static constexpr double kPriorReach = 1.0;      // the default prior: one judged draft per step ...
  static constexpr double kPriorAccept = 0.5;     // ... half accepted
  static constexpr double kSeedPriorReach = 4.0;  // pseudo-drafts of a seeded acceptance prior
  static constexpr double kDecay = 0.97;          // observed acceptance counts: decay per observed round ...
  static constexpr double kPlainDecay = 0.98;     // ... and per plain step

  // skip_cold_samples: the session's first draft step and first window of each size are not samples
  // (the speculator's setting; unit tests of the economics feed every sample).
  explicit AdaptiveDrafts(int max_drafts, bool skip_cold_samples = false);

  // Before the first round: start from the costs an earlier run measured on the same model and
  // settings (its verify_s, draft_step_s, plain_s; zeros are skipped), each as kSeedSamples recent samples.
  // When they say drafting is hopeless, the probe's rounds are plain steps instead of drafts, so a
  // later session on a model where drafting cannot pay does not pay the probe again (its first
  // draft step and window are the session's slowest); exploration still re-measures every count.
  // Only a seed that holds what the probe measures (a draft step and a 2-row window) can skip it: with
  // those missing, "hopeless" would rest on extrapolation from plain steps alone. A seed holding two
  // window sizes (every size where k = 1), the draft step and the bare plain step skips the probe and the
  // warm-up (window_cost's line prices the other sizes, never below a plain step).
  // prior.accept_priors become the acceptance prior of the matching verification context (peak_context),
  // step by step: a step the seed has no rate for keeps the default prior.
  void seed(const AdaptiveStats& prior);
  // Drafts to run this round, 0..k_cap (k_cap <= max_drafts: what fits this round).
  int choose(int k_cap);
  // Measurements of the round just chosen.
  void record_draft(int steps, double seconds);
  void record_verify(int rows, double seconds);
  // A plain step (n = 0): with the drafter's K/V encoded (timed as c_verify(1)) or without (c_plain).
  void record_plain(double seconds, bool encoded);
  // At the start of a round: seconds since the previous round started.
  void record_period(double seconds);
  // Whether the plain step of the round just chosen should encode the drafter's K/V.
  bool encode_plain() const;
  // Before each round: what the peaks are peaks of (the sampling temperature where verification is by
  // sampling, 0 where it is greedy). A change clears the recorded peaks: a greedy call after one at 0.7 must not
  // be held back by the earlier call's peaks.
  void peak_context(double key);
  // The largest probability of the distribution a plain step sampled its token from: the most a draft of
  // that row could be accepted with when verification is by sampling (pass 1 where it is not: greedy).
  void record_peak(double p);
  // R_n as if every draft were accepted with the recent plain steps' peak probabilities (adaptive.h, "Peak
  // bound"); n + 1 before kPeakMin peaks.
  double peak_tokens(int n) const;
  // Not even such drafts could beat plain steps with any count 1..k_cap (false where verification is greedy:
  // peak_context(0); there the peaks predict, they do not bound).
  bool peaks_rule_out(int k_cap) const;
  // Greedy verification: the draft count an exploring round should run now because the recent peaks predict
  // that it pays (adaptive.h, "Peak trigger"), or -1.
  int peak_trigger(int k_cap) const;
  // A verification of `verified` drafts of which the first `accepted` were accepted; `tokens` committed.
  void record_round(int verified, int accepted, int tokens);

  double expected_tokens(int n) const;  // R_n
  int best_count(int k_cap) const;      // the n in 0..k_cap with the largest R_n / C_n
  int explore_count(int k_cap) const;   // the n an exploring round runs
  // The draft count this round should explore, or -1: every explore_every_ rounds, or, while plain steps
  // are the regular choice, each viable count within its own budget (adaptive.h, "Exploration budget").
  int explore_due(int k_cap) const;
  // Rounds that keep lost_steps plain steps per round within kExploreBudget of the time, in
  // [kExploreMin, longest] (the exploration budget's interval and the guard's shorter hold).
  int64_t budget_rounds(double lost_steps, int longest) const;
  double expected_cost(int n) const;  // C_n in seconds (unmeasured sizes are extrapolated)
  // A round of n drafts (n < k) should draft step n as a shadow draft: its acceptance has fewer than
  // kShadowReach judged drafts behind it (adaptive.h, "Shadow drafts").
  bool shadow_wanted(int n) const;
  // The round just chosen is one of the probe's (its draft needs no shadow draft).
  bool probing() const { return rounds_ <= probe_rounds_; }
  // n drafts could beat plain steps if every one were accepted (true until c_plain is measured).
  bool viable(int n) const;
  // No draft count is viable.
  bool hopeless() const;
  // Recent drafting rounds committed fewer tokens per second than plain steps (the guard above).
  bool drafting_loses() const;
  AdaptiveStats stats() const;

 private:
  // c_verify(rows): the median of its recent samples, or the fastest (the viability test); sizes not
  // yet measured extrapolated from the measured ones.
  double window_cost(int rows, bool fastest = false) const;
  double base_cost() const;  // c_plain when measured, else c_verify(1)
  // peak_tokens for every n = 0..k.
  std::array<double, kAdaptiveMaxDrafts + 1> peak_tokens_all() const;
  // n drafts committing `tokens` tokens could beat plain steps, every cost at its fastest recent sample.
  bool could_pay(int n, double tokens) const;
  // An exploring round due now is held back by the peak bound (counted in peak_held_).
  bool held_by_peaks(int k_cap);
  // The recorded peaks bound acceptance (verification by sampling); under greedy verification (peak_context(0))
  // they predict it (the peak trigger).
  bool peaks_bound() const { return peak_key_ != 0.0; }
  double overhead(bool fastest = false) const { return fastest ? overhead_.min() : overhead_.value(); }
  bool warm() const;  // the round being recorded came after the warm-up
  int64_t warmup_rounds() const;

  int k_;
  bool seeded_ = false;
  bool seed_has_probe_ = false;        // the seed held a draft step and a 2-row window
  int warmup_passes_ = kWarmupPasses;  // fewer once drafting was found hopeless
  int64_t rounds_ = 0;
  int since_explore_ = 0;
  int explore_every_ = kExploreEvery;
  bool exploring_ = false;      // the round just chosen explores
  bool explored_ = false;       // an exploring round ran since the last regular choice
  int last_best_ = -1;          // the last regular choice
  bool guard_round_ = false;    // the round just chosen is a regular drafting round
  double round_now_s_ = 0.0;    // its seconds so far
  double last_round_s_ = -1.0;  // the last recorded round's timed seconds (-1: none)
  int last_round_tokens_ = 0;   // and the tokens it committed
  RecentMedian overhead_;       // per-round overhead samples
  // Exploring rounds: what they cost beyond their pricing, in plain steps (record_period).
  RecentMedian explore_extra_;
  double explore_cost_s_ = 0.0;       // C_n of the last exploring round with drafts (0: none yet this session)
  double last_explore_cost_s_ = 0.0;  // of the last recorded round when it explored with drafts (0: it did not)
  int streak_n_ = 0;                  // > 0: the next round explores with this many drafts
  int streak_len_ = 0;                // exploring rounds in the current streak
  // The first draft step and the first window of each size in a session are not samples: measured on the demo
  // model, they take 2-3x a later one (first use of their code paths and buffers), and with only a few samples
  // by the end of the probe and the warm-up they decided medians and the hopeless test.
  std::array<bool, kAdaptiveMaxDrafts + 2> verify_warm_{};
  bool draft_warm_ = false;                                    // both start true without skip_cold_samples
  int probe_rounds_ = kProbeRounds;                            // with skip_cold_samples one draft round more
  double guard_tokens_ = 0.0, guard_s_ = 0.0, guard_n_ = 0.0;  // decayed sums over those rounds
  int64_t guard_until_ = 0;                                    // > 0: plain steps until this round
  int64_t guarded_ = 0;                                        // rounds the guard turned into plain steps
  std::array<double, kPeakWindow> peaks_{};                    // ring of plain-step peaks (record_peak)
  int peak_n_ = 0, peak_next_ = 0;
  double peak_key_ = -1.0;                     // peak_context's key (-1: none yet)
  int64_t peak_held_ = 0;                      // rounds in which the peak bound held a due exploring round back
  int trigger_every_ = kTriggerEvery;          // the peak trigger's current interval
  int trial_left_ = 0;                         // rounds of the trigger's trial still to run (their streak)
  double trial_tokens_ = 0.0, trial_s_ = 0.0;  // the trial's tokens and seconds so far
  int64_t peak_triggered_ = 0;
  int64_t peaks_recorded_ = 0;                                 // record_peak calls
  mutable int64_t trigger_seen_ = -1;                          // peaks_recorded_ when the trigger last judged the peaks
  std::array<int64_t, kAdaptiveMaxDrafts + 1> last_chosen_{};  // round each draft count was last run
  std::array<RecentMedian, kAdaptiveMaxDrafts + 2> verify_{};  // [m] windows of m rows
  RecentMedian draft_, plain_;
  std::array<int64_t, kAdaptiveMaxDrafts + 2> verify_n_{};  // this session's samples (stats)
  int64_t draft_n_ = 0, plain_n_ = 0;
  // The same costs over this session's own samples only (no seed): what stats() reports once measured, so
  // a run never passes a mix of its seed and its own samples on as its measurement.
  std::array<RecentMedian, kAdaptiveMaxDrafts + 2> own_verify_{};
  RecentMedian own_draft_, own_plain_;
  std::array<double, kAdaptiveMaxDrafts> reach_{};   // decayed count of judged drafts per step
  std::array<double, kAdaptiveMaxDrafts> accept_{};  // decayed count of accepted drafts per step
  // The acceptance prior in force (adaptive.h, "Acceptance prior"): per step the seeded rate, kSeedPriorReach
  // pseudo-drafts of it, or -1 for the default (kPriorReach at kPriorAccept); the seed's priors per context,
  // and this context's undecayed totals (stats).
  std::array<double, kAdaptiveMaxDrafts> seeded_rate_{};
  std::array<AcceptPrior, kMaxAcceptPriors> seed_priors_{};
  std::array<int64_t, kAdaptiveMaxDrafts> judged_{};
  std::array<int64_t, kAdaptiveMaxDrafts> accepted_{};
  double accept_key_ = -1.0;  // the context judged_ / accepted_ count in (-1: none yet)
  // The posterior mean of step j's acceptance.
  double acceptance(int j) const;
  // The prior of the context peak_key_ from the seed's priors (the default where it has none).
  void apply_prior();
  std::array<int64_t, kAdaptiveMaxDrafts + 1> chosen_{};
  double gain_sum_ = 0.0;  // Σ estimated gains of the rounds chosen by the economics
  int64_t gain_n_ = 0;
  double round_s_ = 0.0;  // seconds of the rounds (drafting + verification)
  int64_t tokens_ = 0;    // tokens the rounds committed
  // Mean plain-step seconds, without / with the drafter's encoding: the measured gain's baseline
  // (a mean, like round_s_ / tokens_, so both see the same interruptions).
  double plain_sum_ = 0.0, v1_sum_ = 0.0;
  int64_t plain_cnt_ = 0, v1_cnt_ = 0;
};

}  // namespace strata::draft
