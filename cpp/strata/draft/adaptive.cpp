#include "strata/draft/adaptive.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "strata/util/error.h"

namespace strata::draft {

void RecentMedian::add(double x) {
  // The samples also stay sorted (sorted_[0..n_)), which the median and the minimum are read from: the one
  // leaving the ring is taken out and x put in by insertion, a few moves (this runs three times a plain step).
  int i = n_;
  if (n_ == kRecent) {
    const double out = buf_[static_cast<std::size_t>(next_)];
    i = 0;
    while (i + 1 < n_ && !(sorted_[static_cast<std::size_t>(i)] == out)) ++i;  // every sample of buf_ is in sorted_
    for (; i + 1 < n_; ++i) sorted_[static_cast<std::size_t>(i)] = sorted_[static_cast<std::size_t>(i + 1)];
    i = n_ - 1;
  } else {
    ++n_;
  }
  for (; i > 0 && sorted_[static_cast<std::size_t>(i - 1)] > x; --i)
    sorted_[static_cast<std::size_t>(i)] = sorted_[static_cast<std::size_t>(i - 1)];
  sorted_[static_cast<std::size_t>(i)] = x;
  buf_[static_cast<std::size_t>(next_)] = x;
  next_ = (next_ + 1) % kRecent;
}

AdaptiveDrafts::AdaptiveDrafts(int max_drafts, bool skip_cold_samples) : k_(max_drafts) {
  seeded_rate_.fill(-1.0);
  if (skip_cold_samples) {
    probe_rounds_ = kProbeRounds + 1;  // one more draft round: the first one's costs are not samples
  } else {
    verify_warm_.fill(true);
    draft_warm_ = true;
  }
  if (max_drafts < 1 || max_drafts > kAdaptiveMaxDrafts)
    throw_error(ErrorKind::Value, "adaptive speculation: max_drafts " + std::to_string(max_drafts) +
                                      " is outside [1, " + std::to_string(kAdaptiveMaxDrafts) + "]");
}

double AdaptiveDrafts::window_cost(int rows, bool fastest) const {
  auto cost = [&](int m) {
    const RecentMedian& v = verify_[static_cast<std::size_t>(m)];
    return fastest ? v.min() : v.value();
  };
  if (!verify_[static_cast<std::size_t>(rows)].empty()) return cost(rows);
  // Unmeasured, no window is cheaper than a bare plain step. The 1-row window (a plain step with the
  // drafter's encoding) is priced as one: extrapolated from the larger windows' line it fell below the
  // bare step (a 4-row window slower than the others lowered it), C_0 took it, and plain decoding looked
  // ~10 % cheaper than it was on the demo model, which priced drafting out where it paid. A steep line
  // through two larger sizes (a seed of 3- and 4-row windows) must not price a 2-row window below one.
  const double floor = plain_.empty() ? 0.0 : fastest ? plain_.min() : plain_.value();
  if (rows == 1 && !plain_.empty()) return floor;
  // Otherwise a line through the smallest and the largest measured sizes. With one size m > 1 known
  // (the probe's 2-row windows), through it and the bare plain step as one row: a window of m rows
  // costs at least a plain step, so the slope is never below the true one, while a line through the
  // origin (proportional) put a 4-row window at twice a 2-row one where the rows past the first cost a
  // fifth of a step (measured on an AMX Xeon: 2.8 plain steps against 1.8) and made drafting look
  // hopeless. One row per step when no plain step is measured either; 1 s per row before anything is.
  int lo = 0, hi = 0;
  for (int m = 1; m <= k_ + 1; ++m)
    if (!verify_[static_cast<std::size_t>(m)].empty()) {
      if (lo == 0) lo = m;
      hi = m;
    }
  if (lo == 0) return static_cast<double>(rows);
  const double clo = cost(lo);
  if (hi == lo && lo > 1 && !plain_.empty()) {
    const double c1 = std::min(fastest ? plain_.min() : plain_.value(), clo);
    return c1 + (clo - c1) * static_cast<double>(rows - 1) / static_cast<double>(lo - 1);
  }
  if (hi == lo) return clo * static_cast<double>(rows) / static_cast<double>(lo);
  const double slope = (cost(hi) - clo) / static_cast<double>(hi - lo);
  return std::max(clo + slope * static_cast<double>(rows - lo), floor);
}

double AdaptiveDrafts::base_cost() const { return plain_.empty() ? window_cost(1) : plain_.value(); }

double AdaptiveDrafts::acceptance(int j) const {
  const auto s = static_cast<std::size_t>(j);
  const bool seeded = seeded_rate_[s] >= 0.0;
  const double w = seeded ? kSeedPriorReach : kPriorReach, a = seeded ? seeded_rate_[s] : kPriorAccept;
  return (accept_[s] + w * a) / (reach_[s] + w);
}

double AdaptiveDrafts::expected_tokens(int n) const {
  double r = 1.0, all = 1.0;
  for (int j = 0; j < n; ++j) {
    all *= acceptance(j);
    r += all;
  }
  return r;
}

double AdaptiveDrafts::expected_cost(int n) const {
  if (n == 0) return std::min(window_cost(1), base_cost()) + overhead();
  // n < k: the speculator may draft one more step than it verifies (the shadow draft that observes the next
  // step's acceptance), a draft step priced into every such round though drafted only while wanted
  // (adaptive.h, "Shadow drafts").
  const int steps = n < k_ ? n + 1 : n;
  return static_cast<double>(steps) * draft_.value() + window_cost(n + 1) + overhead();
}

bool AdaptiveDrafts::shadow_wanted(int n) const {
  return n >= 1 && n < k_ && reach_[static_cast<std::size_t>(n)] < kShadowReach;
}

int64_t AdaptiveDrafts::warmup_rounds() const {
  return probe_rounds_ + static_cast<int64_t>(warmup_passes_) * (k_ + 1);
}

bool AdaptiveDrafts::warm() const { return rounds_ > warmup_rounds(); }

bool AdaptiveDrafts::could_pay(int n, double tokens) const {
  // n drafts committing `tokens` tokens for C_n beat that many plain steps. Every time at its fastest recent
  // sample. c_plain's floor: a step with the drafter's encoding (c_verify(1), the warm-up's plain steps) is
  // never cheaper than one without, so the fastest of either bounds the bare step from above — one slow bare
  // sample must not keep drafting viable for a whole warm-up. Every round also pays the per-round overhead once.
  if (plain_.empty()) return true;
  double plain = plain_.min();
  if (!verify_[1].empty()) plain = std::min(plain, verify_[1].min());
  const double o = overhead(true);
  return static_cast<double>(n) * draft_.min() + window_cost(n + 1, true) + o < tokens * (plain + o);
}

bool AdaptiveDrafts::viable(int n) const {
  // Even if every draft were accepted, n drafts would commit n + 1 tokens.
  return could_pay(n, static_cast<double>(n + 1));
}

void AdaptiveDrafts::peak_context(double key) {
  if (key == peak_key_) return;
  peak_key_ = key;  // another temperature or verification rule: the peaks seen so far say nothing of it
  peak_n_ = peak_next_ = 0;
  // The acceptance prior of this context: the seed's where it has one (adaptive.h, "Acceptance prior").
  apply_prior();
}

void AdaptiveDrafts::apply_prior() {
  // Per step: the seed's measured rate (as kSeedPriorReach pseudo-drafts, acceptance()), or -1 (the default,
  // kPriorReach at kPriorAccept) where the seed measured none for that step or has no prior for this context.
  seeded_rate_.fill(-1.0);
  for (const AcceptPrior& p : seed_priors_) {
    if (p.key < 0.0 || std::abs(p.key - peak_key_) > 1e-6) continue;
    for (int j = 0; j < k_; ++j) {
      const auto i = static_cast<std::size_t>(j);
      if (p.accept[i] >= 0.0) seeded_rate_[i] = std::min(p.accept[i], 1.0);
    }
    break;
  }
}

void AdaptiveDrafts::record_peak(double p) {
  peaks_[static_cast<std::size_t>(peak_next_)] = std::clamp(p, 0.0, 1.0);
  peak_next_ = (peak_next_ + 1) % kPeakWindow;
  peak_n_ = std::min(peak_n_ + 1, kPeakWindow);
  ++peaks_recorded_;
}

// Every A_i (i < k <= kAdaptiveMaxDrafts) has at least one start row once the bound applies.
static_assert(AdaptiveDrafts::kPeakMin >= kAdaptiveMaxDrafts);

std::array<double, kAdaptiveMaxDrafts + 1> AdaptiveDrafts::peak_tokens_all() const {
  // A_i = the mean over start rows t (the recorded peaks oldest first) of m_t·…·m_{t+i}, every i < k in one
  // pass of running products; R_n = 1 + Σ_{i<n} A_i, at most n + 1.
  std::array<double, kAdaptiveMaxDrafts + 1> r{};
  for (int n = 0; n <= k_; ++n) r[static_cast<std::size_t>(n)] = static_cast<double>(n + 1);
  if (peak_n_ < kPeakMin) return r;
  const int first = peak_n_ < kPeakWindow ? 0 : peak_next_;
  auto m = [&](int t) { return peaks_[static_cast<std::size_t>((first + t) % kPeakWindow)]; };
  std::array<double, kAdaptiveMaxDrafts> sum{};
  for (int t = 0; t < peak_n_; ++t) {
    double prod = 1.0;
    for (int i = 0; i < k_ && t + i < peak_n_; ++i) {
      prod *= m(t + i);
      sum[static_cast<std::size_t>(i)] += prod;
    }
  }
  double acc = 1.0;
  for (int i = 0; i < k_; ++i) {
    acc += sum[static_cast<std::size_t>(i)] / static_cast<double>(peak_n_ - i);
    r[static_cast<std::size_t>(i + 1)] = std::min(acc, static_cast<double>(i + 2));
  }
  return r;
}

double AdaptiveDrafts::peak_tokens(int n) const {
  return peak_tokens_all()[static_cast<std::size_t>(std::clamp(n, 0, k_))];
}

bool AdaptiveDrafts::peaks_rule_out(int k_cap) const {
  if (peak_n_ < kPeakMin || k_cap < 1 || !peaks_bound()) return false;
  const auto r = peak_tokens_all();
  for (int n = 1; n <= std::min(k_cap, k_); ++n)
    if (could_pay(n, r[static_cast<std::size_t>(n)])) return false;
  return true;
}

int AdaptiveDrafts::peak_trigger(int k_cap) const {
  // Greedy verification only, after the warm-up, while plain steps rule on their own (not the guard's hold),
  // and drafting could pay at all.
  if (peaks_bound() || peak_n_ < kPeakMin || !warm() || last_best_ != 0 || guard_until_ > 0 ||
      since_explore_ < trigger_every_ - 1 || peaks_recorded_ == trigger_seen_ || hopeless())
    return -1;
  // Judged once per recorded peak (every kGreedyPeakEvery-th plain step), not every round.
  trigger_seen_ = peaks_recorded_;
  const auto r = peak_tokens_all();
  double rate = kTriggerGain / expected_cost(0);
  int pick = -1;
  for (int n = 1; n <= std::min(k_cap, k_); ++n) {
    if (!viable(n)) continue;
    const double q = r[static_cast<std::size_t>(n)] / expected_cost(n);
    if (q > rate) {
      rate = q;
      pick = n;
    }
  }
  return pick;
}

bool AdaptiveDrafts::held_by_peaks(int k_cap) {
  // Only where the costs alone leave drafting viable and plain steps rule: a hopeless session keeps its
  // longest-interval exploration (costs measured under load must not rule drafting out for good), and
  // while drafting rules (or the guard holds it) exploring re-measures counts the economics run anyway.
  // A held exploring round stays due, so the next round asks again: exploring resumes as soon as the peaks
  // allow it. peak_held_ counts the rounds held so.
  if (last_best_ != 0 || guard_until_ > 0 || hopeless() || !peaks_rule_out(k_cap)) return false;
  ++peak_held_;
  return true;
}

bool AdaptiveDrafts::drafting_loses() const {
  if (guard_n_ < kGuardMinRounds || guard_s_ <= 0.0) return false;
  return guard_tokens_ / guard_s_ * expected_cost(0) < 1.0;  // plain steps' cost as the economics see it
}

bool AdaptiveDrafts::hopeless() const {
  if (plain_.empty()) return false;
  for (int n = 1; n <= k_; ++n)
    if (viable(n)) return false;
  return true;
}

void AdaptiveDrafts::seed(const AdaptiveStats& prior) {
  if (rounds_ != 0) throw_error(ErrorKind::Value, "adaptive speculation: seed before the first round");
  // Each seeded cost counts as kSeedSamples recent samples: a process's first windows and draft steps are
  // slower than the rest for a few rounds (not only the first, which is skipped), and with the seed as one
  // sample a single such window decided the median of its size until that size ran again — on the demo
  // model a 4-row window at 1.1-1.3 ms against 0.85-0.92 kept three drafts out of a predictable text's first
  // 46 rounds. The session's own samples replace the seed's as the ring fills.
  for (int copy = 0; copy < kSeedSamples; ++copy) {
    for (int m = 1; m <= std::min(k_, prior.max_drafts) + 1; ++m)
      if (prior.verify_s[static_cast<std::size_t>(m)] > 0.0)
        verify_[static_cast<std::size_t>(m)].add(prior.verify_s[static_cast<std::size_t>(m)]);
    if (prior.draft_step_s > 0.0) draft_.add(prior.draft_step_s);
    if (prior.plain_s > 0.0) plain_.add(prior.plain_s);
  }
  seed_priors_ = prior.accept_priors;
  apply_prior();  // for the context already set, if peak_context ran before the seed
  seeded_ = true;
  seed_has_probe_ = prior.draft_step_s > 0.0 && prior.max_drafts >= 1 && prior.verify_s[2] > 0.0;
  // A seed with every cost the probe and the warm-up measure (each window size, the draft step, the bare
  // plain step) skips both: the session starts with the economics, and acceptance comes from the seed's
  // prior (acceptance_priors), exploration and its streaks.
  // (c_verify(1), a plain step with the drafter's encoding, is not needed: plain steps do without it.)
  // Two window sizes are enough where k > 1: window_cost's line through them prices the others. A session
  // that drafts the same count round after round measures no other size (the first window of a size is cold,
  // not a sample), so with every size required its seed lost the 2-row window within RUNS_REMEMBERED runs and
  // the next process re-ran the probe and the warm-up, a dozen rounds of the wrong draft counts.
  int sizes = 0;
  for (int m = 2; m <= k_ + 1; ++m) sizes += prior.verify_s[static_cast<std::size_t>(m)] > 0.0 ? 1 : 0;
  const bool complete =
      prior.draft_step_s > 0.0 && prior.max_drafts >= k_ && prior.plain_s > 0.0 && sizes >= std::min(2, k_);
  if (complete) {
    probe_rounds_ = 0;
    warmup_passes_ = 0;
    if (hopeless()) explore_every_ = kExploreMax;  // as after a probe that found it so
  }
}

int AdaptiveDrafts::best_count(int k_cap) const {
  int n = 0;
  double best = -1.0;
  for (int i = 0; i <= k_cap; ++i) {
    const double rate = expected_tokens(i) / expected_cost(i);
    if (rate > best) {
      best = rate;
      n = i;
    }
  }
  return n;
}

int AdaptiveDrafts::explore_count(int k_cap) const {
  // The draft count run longest ago (ties to the larger), so every estimate stays live; among the viable
  // ones unless none is (then any: costs measured under load must not rule drafting out for good).
  int n = 0;
  const bool any = hopeless();
  for (int i = 0; i <= k_cap; ++i)
    if ((i == 0 || any || viable(i)) &&
        last_chosen_[static_cast<std::size_t>(i)] <= last_chosen_[static_cast<std::size_t>(n)])
      n = i;
  return n;
}

int64_t AdaptiveDrafts::budget_rounds(double lost_steps, int longest) const {
  const double rounds = lost_steps <= 0.0 ? 0.0 : std::ceil(lost_steps / kExploreBudget);
  return static_cast<int64_t>(std::clamp(rounds, double{kExploreMin}, static_cast<double>(longest)));
}

int AdaptiveDrafts::explore_due(int k_cap) const {
  if (since_explore_ < kExploreMin - 1) return -1;  // every interval is at least kExploreMin
  // Not while the guard holds drafting back (the economics then price drafting as paying, and it does
  // not), nor while drafting rules or is hopeless: every explore_every_ rounds, the count run longest ago.
  if (last_best_ != 0 || guard_until_ > 0 || hopeless())
    return since_explore_ >= explore_every_ - 1 ? explore_count(k_cap) : -1;
  // Plain steps rule: the budget is shared equally by the viable counts, each with its own interval (the
  // rounds that keep the plain steps it loses, as the economics price it, within its share of
  // kExploreBudget). Exploring rounds come every shortest interval, and each runs the count most overdue
  // against its own: under expert streaming one draft loses almost nothing against a plain step while
  // three lose most of one, so one draft is explored every ten or so rounds and three rarely (with one
  // interval for whichever count ran longest ago, drafting came back 30 rounds after the text allowed
  // it). Where every count loses a step or so (the demo model) all intervals are explore_every_, and the
  // count run longest ago runs, as before.
  // After the session's first exploring round the budget also caps exploration (adaptive.h, "Exploration
  // budget"): intervals up to kExploreMax, each loss plus what exploring rounds cost beyond their price.
  const double c0 = expected_cost(0);
  const double extra = explore_extra_.empty() ? 0.0 : explore_extra_.value();
  const int longest = explore_cost_s_ > 0.0 ? kExploreMax : explore_every_;
  // Over every count 1..k, whatever fits this round: a call's last rounds (k_cap < k) must not hand the counts
  // that still fit a larger share of the budget (they explored one draft at nearly every call's end), and a
  // count that is due but does not fit waits for a round where it does.
  std::array<double, kAdaptiveMaxDrafts + 1> lost{};  // plain steps an exploring round loses; < 0: not viable
  int counts = 0;
  for (int n = 1; n <= k_; ++n) {
    const bool v = viable(n);
    lost[static_cast<std::size_t>(n)] =
        v ? std::max(0.0, (expected_cost(n) - expected_tokens(n) * c0) / c0) + extra : -1.0;
    counts += v ? 1 : 0;
  }
  int64_t shortest = 0;
  // The most overdue count; the most overdue one that fits and is due on its own. A seeded session's counts
  // are all equally overdue at its first exploring round. Ties go to the larger count where verification is
  // greedy (a predictable text's streak starts at three drafts: one draft first, then two, cost the README's
  // prompt at temperature 0 3 % of its gain), to the smaller, cheaper round where it is by sampling (the peaks
  // bound acceptance: on the demo model at 0.7 an exploring round of three drafts lost ~1 ms, one ~0.5).
  const bool smaller = peak_key_ > 0.0;  // verification by sampling (peak_context: its temperature)
  auto before = [smaller](double overdue, double best) { return smaller ? overdue > best : overdue >= best; };
  int pick = -1, fits = -1;
  double most = 0.0, most_fitting = 1.0;
  for (int n = 1; n <= k_; ++n) {
    const auto i = static_cast<std::size_t>(n);
    if (lost[i] < 0.0) continue;
    const int64_t interval = budget_rounds(counts * lost[i], longest);
    shortest = shortest == 0 ? interval : std::min(shortest, interval);
    const double overdue = static_cast<double>(rounds_ - last_chosen_[i]) / static_cast<double>(interval);
    if (pick < 0 || before(overdue, most)) {
      most = overdue;
      pick = n;
    }
    if (n <= k_cap && (fits < 0 ? overdue >= most_fitting : before(overdue, most_fitting))) {
      most_fitting = overdue;
      fits = n;
    }
  }
  if (pick < 0 || since_explore_ < shortest - 1) return -1;
  // A count that does not fit this round waits for one where it does; meanwhile a count that fits runs only
  // when its own interval is over (else rounds that never fit the most overdue count would explore nothing).
  return pick <= k_cap ? pick : fits;
}

int AdaptiveDrafts::choose(int k_cap) {
  k_cap = std::clamp(k_cap, 0, k_);
  int n = 0;
  exploring_ = false;
  const int64_t pass_len = static_cast<int64_t>(k_) + 1;
  if (rounds_ >= probe_rounds_ && rounds_ < warmup_rounds() && (rounds_ - probe_rounds_) % pass_len == 0 &&
      hopeless()) {
    // The probe (one draft twice, then a bare plain step) or a warm-up pass found that no draft count can
    // beat plain decoding: the warm-up ends, and exploration starts at its longest interval.
    warmup_passes_ = static_cast<int>((rounds_ - probe_rounds_) / pass_len);
    explore_every_ = kExploreMax;
  }
  if (rounds_ < probe_rounds_) {
    // Seeded with costs that say drafting cannot pay: the probe's drafts become plain steps.
    n = rounds_ < probe_rounds_ - 1 && !(seed_has_probe_ && hopeless()) ? std::min(k_cap, 1) : 0;
  } else if (rounds_ < warmup_rounds()) {
    n = std::min(k_cap, k_ - static_cast<int>((rounds_ - probe_rounds_) % pass_len));
    if (n > 0 && !viable(n)) n = 0;
  } else if (streak_n_ > 0 && streak_n_ <= k_cap && viable(streak_n_) && best_count(k_cap) == 0) {
    // The last exploring round paid for itself: explore again with as many drafts (adaptive.h, "Streaks"),
    // so a text that turned predictable is measured in a few rounds, not one per interval; once the
    // economics choose drafting themselves, regular rounds take over.
    exploring_ = true;
    explored_ = true;
    n = streak_n_;
  } else if (const int tn = peak_trigger(k_cap); tn > 0) {
    // The recent peaks predict that drafting pays now (adaptive.h, "Peak trigger"): a trial of kTrialRounds.
    exploring_ = true;
    explored_ = true;
    ++peak_triggered_;
    trial_left_ = kTrialRounds;
    trial_tokens_ = trial_s_ = 0.0;
    n = tn;
  } else if (const int due = explore_due(k_cap); due >= 0 && !held_by_peaks(k_cap)) {
    exploring_ = true;
    explored_ = true;
    trial_left_ = 0;
    n = due;
  } else {
    trial_left_ = 0;
    n = best_count(k_cap);
    double best = expected_tokens(n) / expected_cost(n);
    // The realized-gain guard (adaptive.h): while recent regular drafting rounds lose against plain
    // steps, run plain steps for an exploration interval, then let drafting be measured afresh.
    // It forgets when its interval ends, and when drafting is chosen again after plain choices (judged on
    // its new rounds, not on losses from before).
    if ((guard_until_ > 0 && rounds_ >= guard_until_) || (n > 0 && last_best_ == 0 && guard_until_ == 0)) {
      guard_tokens_ = guard_s_ = guard_n_ = 0.0;
      guard_until_ = 0;
    }
    if (n > 0 && guard_until_ == 0 && drafting_loses()) {
      // For an exploration interval, or shorter when the rounds lost little (the exploration budget's
      // rule: plain steps lost per round over kExploreBudget): on a memory-bound model the first rounds of
      // an unpredictable text lose a tenth of a step each, and 32 rounds of plain steps lost the gain.
      const double c0 = expected_cost(0);
      guard_until_ = rounds_ + budget_rounds((guard_s_ - guard_tokens_ * c0) / (guard_n_ * c0), explore_every_);
    }
    if (n > 0 && guard_until_ > 0) {
      n = 0;
      best = expected_tokens(0) / expected_cost(0);
      ++guarded_;
    }
    guard_round_ = n > 0;
    // The expected speed-up over a plain step as the economics price it (C_0), so a plain choice reads
    // 1.0: with base_cost() (c_plain alone) a seeded c_verify(1) from a quieter run, below a c_plain
    // measured under load, made a session of plain steps report gains of several x.
    gain_sum_ += best * expected_cost(0);
    ++gain_n_;
    if (explored_)
      explore_every_ = n != last_best_ ? kExploreEvery
                       : hopeless()    ? kExploreMax
                                       : std::min(2 * explore_every_, kExploreMax);
    explored_ = false;
    last_best_ = n;
  }
  if (exploring_ && n > 0) {
    // What the economics price this exploring round at: record_period compares the round's whole period
    // with it (explore_extra_).
    explore_cost_s_ = expected_cost(n);
  }
  // A process's first rounds are slower than the rest (cold code paths and caches, the caller's first
  // tokens): the guard does not judge a session's first kGuardSkipRounds rounds. Judging them, it held a
  // seeded session of a predictable text to plain steps for its rounds 5-16 (the demo model, temperature 0).
  if (exploring_ || rounds_ < warmup_rounds() || rounds_ < kGuardSkipRounds) guard_round_ = false;
  since_explore_ = exploring_ ? 0 : since_explore_ + 1;
  round_now_s_ = 0.0;
  last_chosen_[static_cast<std::size_t>(n)] = rounds_;
  ++chosen_[static_cast<std::size_t>(n)];
  ++rounds_;
  return n;
}

void AdaptiveDrafts::record_draft(int steps, double seconds) {
  if (steps < 1) return;
  round_now_s_ += seconds;
  if (warm()) round_s_ += seconds;
  if (!draft_warm_) {  // the session's first draft step is cold (see verify_warm_), and so is its round
    draft_warm_ = true;
    guard_round_ = false;
    return;
  }
  draft_.add(seconds / static_cast<double>(steps));
  own_draft_.add(seconds / static_cast<double>(steps));
  ++draft_n_;
}

void AdaptiveDrafts::record_verify(int rows, double seconds) {
  if (rows < 1 || rows > k_ + 1) return;
  round_now_s_ += seconds;
  if (warm()) round_s_ += seconds;
  const auto m = static_cast<std::size_t>(rows);
  if (!verify_warm_[m]) {    // the session's first window of this size is cold: not a sample, nor a round the
    verify_warm_[m] = true;  // realized-gain guard judges
    guard_round_ = false;
    return;
  }
  verify_[m].add(seconds);
  own_verify_[m].add(seconds);
  ++verify_n_[m];
}

void AdaptiveDrafts::record_plain(double seconds, bool encoded) {
  if (encoded) {
    v1_sum_ += seconds;
    ++v1_cnt_;
    record_verify(1, seconds);
    return;
  }
  plain_sum_ += seconds;
  ++plain_cnt_;
  plain_.add(seconds);
  own_plain_.add(seconds);
  ++plain_n_;
  round_now_s_ += seconds;
  if (warm()) round_s_ += seconds;
}

bool AdaptiveDrafts::encode_plain() const {
  // The probe's plain step skips the encoding: c_plain is then measured from the start, so the
  // economics compares drafting with what decoding without the drafter costs even when it drafts
  // every round afterwards (c_verify(1) includes the encoding, a fifth of a step on the demo model,
  // and would make plain decoding look slower than it is), and the hopeless test has its baseline.
  // The warm-up passes' plain steps and exploring plain steps encode (c_verify(1) samples); every
  // other plain step does not: the target keeps its rows and encodes the recent ones in one batch
  // before the next draft round (DecodeTarget::catch_up_drafter).
  const int64_t round = rounds_ - 1;  // the round just chosen
  if (round < warmup_rounds()) return round >= probe_rounds_;
  return exploring_;
}

void AdaptiveDrafts::record_period(double seconds) {
  const double timed = last_round_s_;
  const int tokens = last_round_tokens_;
  const double priced = last_explore_cost_s_;
  last_round_s_ = -1.0;
  last_explore_cost_s_ = 0.0;
  // An exploring round: its whole period (the catch-up encoding before its draft steps, a cold first
  // window, the caller's work on its tokens) against the cost it was priced at, in plain steps; a pause of
  // the caller (a period of several such rounds) is not a sample.
  if (priced > 0.0) {
    const double c0 = expected_cost(0);
    if (c0 > 0.0 && seconds >= 0.0 && seconds <= 4.0 * priced) explore_extra_.add(std::max(0.0, seconds - priced) / c0);
    return;  // its catch-up is not every round's overhead
  }
  if (timed < 0.0 || tokens != 1 || !(seconds >= timed)) return;
  // A pause of the caller is not a round's overhead: only periods within a few rounds' cost count.
  if (seconds > 4.0 * timed) return;
  overhead_.add(seconds - timed);
}

void AdaptiveDrafts::record_round(int verified, int accepted, int tokens) {
  if (warm()) tokens_ += tokens;
  // A streak goes on while exploring rounds pay for themselves: their tokens at plain steps' cost (C_0)
  // take at least the round's seconds and its overhead; at most kStreakMax rounds.
  // Every draft accepted: one more next time, up to k.
  const int next = std::min(accepted >= verified ? verified + 1 : verified, k_);
  if (trial_left_ > 0 && exploring_ && verified >= 1) {
    // A trial the peak trigger started: its rounds are judged together (one round's payoff is too noisy to
    // tell a drafter at 0.9 from one at 0.7), then the trigger backs off or the streak goes on.
    trial_tokens_ += static_cast<double>(tokens);
    trial_s_ += round_now_s_ + overhead();
    if (--trial_left_ > 0) {
      streak_n_ = next;
    } else {
      const bool paid = trial_tokens_ * expected_cost(0) >= trial_s_;
      trigger_every_ = paid ? kTriggerEvery : std::min(2 * trigger_every_, kExploreMax);
      streak_n_ = paid ? next : 0;
      streak_len_ = paid ? streak_len_ + 1 : 0;
    }
  } else if (exploring_ && verified >= 1 && streak_len_ < kStreakMax &&
             static_cast<double>(tokens) * expected_cost(0) >= round_now_s_ + overhead()) {
    streak_n_ = next;
    ++streak_len_;
  } else {
    streak_n_ = 0;
    streak_len_ = 0;
  }
  last_round_s_ = round_now_s_;
  last_round_tokens_ = tokens;
  last_explore_cost_s_ = exploring_ && verified >= 1 ? explore_cost_s_ : 0.0;
  if (guard_round_) {
    // A regular drafting round as a whole, with its overhead: what the guard weighs against plain steps.
    guard_tokens_ = guard_tokens_ * kGuardDecay + static_cast<double>(tokens);
    guard_s_ = guard_s_ * kGuardDecay + round_now_s_ + overhead();
    guard_n_ = guard_n_ * kGuardDecay + 1.0;
    guard_round_ = false;
  }
  round_now_s_ = 0.0;
  if (verified < 1) {
    // A plain step: with a measured prior in force, what was observed before it weighs a little less
    // (adaptive.h, "Acceptance prior"). Toward the default prior (one half, measured nowhere) it does not:
    // that would only make drafting that never paid look less hopeless by the round.
    for (int j = 0; j < k_; ++j) {
      const auto i = static_cast<std::size_t>(j);
      if (seeded_rate_[i] < 0.0) continue;
      reach_[i] *= kPlainDecay;
      accept_[i] *= kPlainDecay;
    }
    return;
  }
  if (peak_key_ != accept_key_) {  // the totals count one verification context
    accept_key_ = peak_key_;
    judged_.fill(0);
    accepted_.fill(0);
  }
  for (int j = 0; j < k_; ++j) {
    const auto s = static_cast<std::size_t>(j);
    reach_[s] *= kDecay;
    accept_[s] *= kDecay;
    // Draft j was judged when the drafts before it were accepted.
    if (j < verified && j <= accepted) {
      reach_[s] += 1.0;
      ++judged_[s];
    }
    if (j < accepted) {
      accept_[s] += 1.0;
      ++accepted_[s];
    }
  }
}

AdaptiveStats AdaptiveDrafts::stats() const {
  AdaptiveStats s;
  s.max_drafts = k_;
  s.seeded = seeded_;
  s.guarded = guarded_;
  s.peak_held = peak_held_;
  s.peak_triggered = peak_triggered_;
  if (peak_n_ > 0) {
    double sum = 0.0;
    for (int t = 0; t < peak_n_; ++t) sum += peaks_[static_cast<std::size_t>(t)];
    s.peak = sum / static_cast<double>(peak_n_);
  }
  s.rounds = rounds_;
  s.chosen = chosen_;
  for (int m = 1; m <= k_ + 1; ++m) {
    const auto i = static_cast<std::size_t>(m);
    s.verify_s[i] = own_verify_[i].empty() ? verify_[i].value() : own_verify_[i].value();
  }
  s.draft_step_s = own_draft_.empty() ? draft_.value() : own_draft_.value();
  s.plain_s = own_plain_.empty() ? plain_.value() : own_plain_.value();
  s.overhead_s = overhead();
  s.verify_samples = verify_n_;
  s.draft_samples = draft_n_;
  s.plain_samples = plain_n_;
  for (int j = 0; j < k_; ++j) s.accept[static_cast<std::size_t>(j)] = acceptance(j);
  s.accept_key = accept_key_;
  s.accept_prior = seeded_rate_;
  s.judged = judged_;
  s.accepted = accepted_;
  if (gain_n_ > 0) s.estimated_gain = gain_sum_ / static_cast<double>(gain_n_);
  const double base = plain_cnt_ > 0 ? plain_sum_ / static_cast<double>(plain_cnt_)
                      : v1_cnt_ > 0  ? v1_sum_ / static_cast<double>(v1_cnt_)
                                     : 0.0;
  if (round_s_ > 0.0) s.measured_gain = static_cast<double>(tokens_) / round_s_ * base;
  return s;
}

}  // namespace strata::draft
