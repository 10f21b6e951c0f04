// Adaptive speculation (draft/adaptive.h): the warm-up schedule, the economics R_n / C_n, the choice
// under cheap and expensive verification, exploration, the acceptance estimate and the gains.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "strata/draft/adaptive.h"
#include "strata/util/error.h"

using strata::draft::AdaptiveDrafts;

namespace {

// Feeds one round as the speculator would: choose, then measured times and the acceptance.
// verify(m) = seconds of an m-row window, draft = seconds per draft step; drafts accepted with
// probability 1 up to `accept_upto` (deterministic).
// One round as the speculator runs it: drafts accepted up to accept_upto, and a shadow draft (one more, not
// verified) when the policy wants step n observed; it is judged when the n verified drafts all pass.
int feed(AdaptiveDrafts& a, int k_cap, double (*verify)(int), double draft, int accept_upto, double bare_plain = 0.0) {
  const int n = a.choose(k_cap);
  const bool shadow = n > 0 && n < k_cap && !a.probing() && a.shadow_wanted(n);
  const int drafted = n + (shadow ? 1 : 0);
  if (n > 0) a.record_draft(drafted, draft * drafted);
  if (n == 0) {
    const bool enc = a.encode_plain();
    a.record_plain(enc || bare_plain <= 0 ? verify(1) : bare_plain, enc);
  } else {
    a.record_verify(n + 1, verify(n + 1));
  }
  const int acc = n < accept_upto ? n : accept_upto;
  if (shadow && acc == n)
    a.record_round(n + 1, n < accept_upto ? n + 1 : n, acc + 1);
  else
    a.record_round(n, acc, acc + 1);
  return n;
}

double flat(int m) { return 1.0 + 0.02 * (m - 1); }      // memory-bound: a window costs about one step
double linear(int m) { return static_cast<double>(m); }  // compute-bound: every row a whole step
double half_shared(int m) { return 0.5 + 0.5 * m; }      // half of a step shared by the window's rows

// An earlier run's costs, as AdaptiveDrafts::seed takes them (0: not measured).
strata::draft::AdaptiveStats prior_costs(int max_drafts, double verify1, double verify2, double draft, double plain) {
  strata::draft::AdaptiveStats prior;
  prior.max_drafts = max_drafts;
  prior.verify_s[1] = verify1;
  prior.verify_s[2] = verify2;
  prior.draft_step_s = draft;
  prior.plain_s = plain;
  return prior;
}

}  // namespace

TEST(warmup_cycles_every_window_size) {
  AdaptiveDrafts a(3);
  CHECK_EQ(a.choose(3), 1);  // the probe: one draft twice, then a plain step
  CHECK(a.probing());
  CHECK_EQ(a.choose(3), 1);
  CHECK(a.probing());
  CHECK_EQ(a.choose(3), 0);
  CHECK(a.probing());
  for (int pass = 0; pass < AdaptiveDrafts::kWarmupPasses; ++pass)
    for (int want = 3; want >= 0; --want) {
      CHECK_EQ(a.choose(3), want);
      CHECK(!a.probing());
    }
  AdaptiveDrafts b(3);
  for (int i = 0; i < AdaptiveDrafts::kProbeRounds; ++i) b.choose(3);
  CHECK_EQ(b.choose(1), 1);  // capped by what fits this round
}

TEST(economics_formula) {
  AdaptiveDrafts a(2);
  a.record_verify(1, 1.0);
  a.record_verify(2, 1.5);
  a.record_verify(3, 2.0);
  a.record_draft(1, 0.1);
  // Prior acceptance 1/2 per step: R_1 = 1.5, R_2 = 1.75.
  CHECK_NEAR(a.expected_tokens(0), 1.0, 1e-12);
  CHECK_NEAR(a.expected_tokens(1), 1.5, 1e-12);
  CHECK_NEAR(a.expected_tokens(2), 1.75, 1e-12);
  CHECK_NEAR(a.expected_cost(0), 1.0, 1e-12);
  CHECK_NEAR(a.expected_cost(2), 2 * 0.1 + 2.0, 1e-12);
  a.record_round(2, 2, 3);  // both accepted: a_0 = a_1 = 1.5 / 2
  CHECK_NEAR(a.expected_tokens(1), 1.75, 1e-12);
  CHECK_NEAR(a.expected_tokens(2), 1.75 + 0.75 * 0.75, 1e-12);
}

TEST(a_shadow_draft_is_wanted_while_its_step_has_few_judged_drafts) {
  // Step n's acceptance is observed by a shadow draft only while it has fewer than kShadowReach judged drafts
  // (decayed); a round of k drafts has no step past them to shadow. C_n prices the shadow draft whether or
  // not a round drafts it, so a round costs at most its price.
  AdaptiveDrafts a(3);
  CHECK(!a.shadow_wanted(0));
  CHECK(a.shadow_wanted(1));
  CHECK(a.shadow_wanted(2));
  CHECK(!a.shadow_wanted(3));
  a.record_verify(2, 1.5);
  a.record_draft(1, 0.1);
  const double c1 = a.expected_cost(1);
  CHECK_NEAR(c1, 2 * 0.1 + 1.5, 1e-12);
  // Rounds verifying two drafts, both accepted: step 1 judged each time (1, 1.97, 2.91, 3.82 decayed).
  int rounds = 0;
  while (a.shadow_wanted(1)) {
    a.record_round(2, 2, 3);
    ++rounds;
  }
  CHECK_EQ(rounds, 4);
  CHECK_NEAR(a.expected_cost(1), c1, 1e-12);
  // Rounds verifying one draft judge step 0 only: step 1's count decays below kShadowReach again
  // (3.82 * 0.97^8 = 2.99), and the shadow comes back.
  rounds = 0;
  while (!a.shadow_wanted(1)) {
    a.record_round(1, 1, 2);
    ++rounds;
  }
  CHECK_EQ(rounds, 8);
  CHECK(!a.shadow_wanted(0));
}

TEST(unmeasured_sizes_are_extrapolated) {
  AdaptiveDrafts a(3);
  CHECK_NEAR(a.expected_cost(2), 3.0, 1e-12);  // nothing measured: one unit per row
  a.record_verify(1, 2.0);
  CHECK_NEAR(a.expected_cost(3), 8.0, 1e-12);  // one size, no plain step: proportional
  a.record_verify(2, 3.0);
  CHECK_NEAR(a.expected_cost(3), 5.0, 1e-12);  // a line through the measured sizes
}

TEST(one_window_size_and_the_plain_step_make_the_line) {
  // The probe measures 2-row windows and a bare plain step: larger windows continue the line through the
  // plain step (one row) and the 2-row window, not a line through the origin.
  AdaptiveDrafts a(3);
  a.record_plain(0.5, false);
  a.record_verify(2, 0.7);
  a.record_draft(1, 0.1);
  CHECK_NEAR(a.expected_cost(3), 3 * 0.1 + 0.5 + 0.2 * 3, 1e-12);  // 4 rows: 1.1 (proportional: 1.4)
  CHECK_NEAR(a.expected_cost(2), 3 * 0.1 + 0.9, 1e-12);            // 2 drafts and the shadow draft
  // Compute-bound (every row a whole step): the same line is proportional.
  AdaptiveDrafts b(3);
  b.record_plain(0.5, false);
  b.record_verify(2, 1.0);
  CHECK_NEAR(b.expected_cost(3), 3 * b.stats().draft_step_s + 2.0, 1e-12);
  CHECK(b.hopeless());
  CHECK(!a.hopeless());
}

TEST(the_first_draft_step_and_window_of_each_size_are_not_samples) {
  AdaptiveDrafts a(2, /*skip_cold_samples=*/true);
  a.record_draft(1, 0.9);   // cold
  a.record_verify(2, 3.0);  // cold
  a.record_verify(3, 4.0);  // cold
  auto s = a.stats();
  CHECK_EQ(s.draft_samples, 0);
  CHECK_EQ(s.verify_samples[2], 0);
  CHECK_EQ(s.verify_samples[3], 0);
  a.record_draft(1, 0.2);
  a.record_verify(2, 1.0);
  a.record_verify(2, 1.2);
  s = a.stats();
  CHECK_EQ(s.draft_samples, 1);
  CHECK_NEAR(s.draft_step_s, 0.2, 1e-12);
  CHECK_EQ(s.verify_samples[2], 2);
  CHECK_NEAR(s.verify_s[2], 1.1, 1e-12);
  CHECK_EQ(s.verify_samples[3], 0);
}

TEST(the_per_round_overhead_is_priced_into_every_round) {
  AdaptiveDrafts a(2);
  a.record_plain(1.0, false);
  a.record_verify(2, 1.5);
  a.record_verify(3, 2.0);
  a.record_draft(1, 0.1);
  CHECK_NEAR(a.expected_cost(0), 1.0, 1e-12);
  // A plain round (1 token) timed at 1.0 s, the next one starting 1.4 s after it began: 0.4 s outside.
  CHECK_EQ(a.choose(2), 1);  // the probe
  a.record_plain(1.0, false);
  a.record_round(0, 0, 1);
  a.record_period(1.4);
  CHECK_NEAR(a.stats().overhead_s, 0.4, 1e-12);
  CHECK_NEAR(a.expected_cost(0), 1.0 + 0.4, 1e-12);
  CHECK_NEAR(a.expected_cost(2), 2 * 0.1 + 2.0 + 0.4, 1e-12);
  // Not samples: a period after a round that committed several tokens, a pause of the caller (> 4 rounds).
  a.record_verify(3, 2.0);
  a.record_round(2, 2, 3);
  a.record_period(3.0);
  a.record_plain(1.0, false);
  a.record_round(0, 0, 1);
  a.record_period(60.0);
  CHECK_NEAR(a.stats().overhead_s, 0.4, 1e-12);
  // With the overhead, two all-accepted drafts (3 tokens for 2.6 s) beat plain steps (1.4 s each) more
  // clearly than without it (2.2 s against 1.0 s each: 1.36 against 1.62 tokens per second-of-plain).
  CHECK(a.viable(2));
}

TEST(drafts_when_windows_are_cheap_and_acceptance_high) {
  AdaptiveDrafts a(3);
  int full = 0, rounds = 0;
  for (int i = 0; i < 200; ++i) {
    const int n = feed(a, 3, flat, 0.05, 3);
    if (i >= 40) {
      ++rounds;
      full += n == 3;
    }
  }
  // Every kExploreEvery-th round re-measures the draft count run longest ago.
  CHECK(full >= rounds - rounds / AdaptiveDrafts::kExploreEvery - 1 && full < rounds);
  const auto s = a.stats();
  CHECK(s.estimated_gain > 2.5 && s.estimated_gain < 4.0);
  CHECK(s.measured_gain > 2.5 && s.measured_gain < 4.0);
  CHECK(s.accept[0] > 0.95);
}

TEST(plain_steps_when_drafts_are_rarely_accepted) {
  AdaptiveDrafts a(3);
  int plain = 0, rounds = 0;
  std::vector<int> explored;  // rounds that drafted after the warm-up: the exploring ones
  for (int i = 0; i < 600; ++i) {
    const int n = feed(a, 3, half_shared, 0.05, 0);  // no draft is ever accepted
    if (i >= AdaptiveDrafts::kProbeRounds + AdaptiveDrafts::kWarmupPasses * 4) {
      ++rounds;
      plain += n == 0;
      if (n > 0) explored.push_back(i);
    }
  }
  CHECK(!a.hopeless());  // all-accepted drafts would pay: only the acceptance makes plain steps win
  CHECK_EQ(plain + static_cast<int>(explored.size()), rounds);
  // Exploring rounds, each confirming the plain choice: the first at round kExploreEvery - 1,
  // the later ones at the exploration budget's intervals, past the doubling ones (64, 128): an exploring
  // round here loses what its window costs over a plain step (0.6 to 1.7 plain steps for 1 to 3 drafts, none
  // accepted), each count has a third of the 1 % budget, so one every 150-256 rounds.
  CHECK_EQ(explored[0], AdaptiveDrafts::kExploreEvery - 1);
  for (std::size_t j = 1; j < explored.size(); ++j) {
    const int gap = explored[j] - explored[j - 1];
    CHECK(gap >= 150 && gap <= AdaptiveDrafts::kExploreMax);
  }
  CHECK(explored.size() >= 3 && explored.size() <= 5);
  const auto s = a.stats();
  CHECK_NEAR(s.estimated_gain, 1.0, 1e-9);  // a plain step is the best the economics can do here
  CHECK(s.measured_gain < 1.0 && s.measured_gain > 0.95);
  CHECK(s.accept[0] < 0.1);
}

TEST(hopeless_drafting_ends_the_warmup_after_one_pass) {
  // Every window row costs a whole step: even all-accepted drafts cannot beat plain steps.
  AdaptiveDrafts a(3);
  std::vector<int> ns, enc;
  for (int i = 0; i < 700; ++i) {
    const int n = feed(a, 3, linear, 0.1, 3, 0.9);
    ns.push_back(n);
    enc.push_back(n == 0 ? (a.encode_plain() ? 1 : 0) : 1);
  }
  CHECK(a.hopeless());
  CHECK((std::vector<int>(ns.begin(), ns.begin() + 5) == std::vector<int>{1, 1, 0, 0, 0}));
  CHECK_EQ(enc[2], 0);  // the probe's plain step is bare: c_plain measured at once
  std::vector<int> explored;
  for (std::size_t i = 3; i < ns.size(); ++i)
    if (ns[i] > 0) explored.push_back(static_cast<int>(i));
  // Exploration at the longest interval from the start.
  CHECK(explored.size() >= 2 && explored.size() <= 3);
  for (std::size_t j = 1; j < explored.size(); ++j)
    CHECK_EQ(explored[j] - explored[j - 1], AdaptiveDrafts::kExploreMax);
  int bare = 0;
  for (std::size_t i = 3; i < ns.size(); ++i) bare += ns[i] == 0 && enc[i] == 0;
  // Every plain step after the probe is bare but the exploring ones (at most 3 of them).
  CHECK(bare >= static_cast<int>(ns.size()) - 3 - static_cast<int>(explored.size()) - 3);
  CHECK_NEAR(a.stats().estimated_gain, 1.0, 1e-9);
}

TEST(a_noisy_probe_ends_the_warmup_after_a_pass) {
  // The probe's plain step was slowed by something else: drafting looks as if it could pay.
  AdaptiveDrafts a(2);
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(a.choose(2), 1);
    a.record_draft(1, 0.1);
    a.record_verify(2, 2.0);
    a.record_round(1, 0, 1);
  }
  CHECK_EQ(a.choose(2), 0);
  CHECK(!a.encode_plain());
  a.record_plain(5.0, false);
  a.record_round(0, 0, 1);
  CHECK(!a.hopeless());
  std::vector<int> ns;
  for (int i = 0; i < 3; ++i) ns.push_back(feed(a, 2, linear, 0.1, 0, 1.0));  // one warm-up pass: 2, 1, 0
  CHECK((ns == std::vector<int>{2, 1, 0}));
  // Faster bare plain samples bring c_plain down to 1.0: hopeless before the second pass.
  for (int i = 0; i < 2; ++i) a.record_plain(1.0, false);
  CHECK(a.hopeless());
  for (int i = 0; i < 20; ++i) CHECK_EQ(feed(a, 2, linear, 0.1, 0, 1.0), 0);
}

TEST(plain_stretches_skip_the_drafter_encoding) {
  AdaptiveDrafts a(3);
  std::vector<int> warm_enc;
  for (int i = 0; i < AdaptiveDrafts::kProbeRounds + AdaptiveDrafts::kWarmupPasses * 4; ++i) {  // warm-up
    const int n = feed(a, 3, half_shared, 0.05, 0, 0.8);
    if (n == 0) warm_enc.push_back(a.encode_plain() ? 1 : 0);
  }
  // The probe's plain step measures the plain step without the drafter; the warm-up passes' encode.
  CHECK((warm_enc == std::vector<int>{0, 1, 1}));
  CHECK_NEAR(a.stats().plain_s, 0.8, 1e-12);
  std::vector<int> ns, enc;
  for (int i = 0; i < 300; ++i) {
    const int n = a.choose(3);
    bool e = true;
    if (n == 0) {
      e = a.encode_plain();
      a.record_plain(e ? half_shared(1) : 0.8, e);
    } else {
      a.record_draft(n, 0.05 * n);
      a.record_verify(n + 1, half_shared(n + 1));
    }
    a.record_round(n, 0, 1);
    ns.push_back(n);
    enc.push_back(e ? 1 : 0);
  }
  int off = 0, on = 0, explorations = 0;
  for (std::size_t i = 0; i < ns.size(); ++i) {
    if (ns[i] == 0) (enc[i] ? on : off) += 1;
    if (ns[i] > 0 && i >= 4) ++explorations;
  }
  CHECK(explorations >= 2);
  // Only exploring plain steps encode (the target encodes the rows a draft round reads before it, in one
  // batch: Sequence::encode_pending); the regular ones never do.
  CHECK(on <= explorations + 1);
  CHECK(off > 20 * on);
  const auto s = a.stats();
  CHECK_NEAR(s.plain_s, 0.8, 1e-12);
  // The gains are against the plain step without the drafter: 1.0 for n = 0 at c_plain.
  CHECK_NEAR(s.estimated_gain, 1.0, 1e-9);
}

TEST(acceptance_follows_a_change) {
  AdaptiveDrafts a(2);
  for (int i = 0; i < 100; ++i) feed(a, 2, flat, 0.05, 2);
  CHECK(a.stats().accept[0] > 0.9);
  // Drafts stop being accepted: the rounds stop drafting within a few rounds (the realized-gain guard
  // sees them lose before the decayed acceptance counts do), and the estimate falls with every round
  // that still drafts.
  int drafted_late = 0;
  for (int i = 0; i < 100; ++i) drafted_late += feed(a, 2, flat, 0.05, 0) > 0 && i >= 50;
  // Each drafting round here loses a tenth of a step, so the guard and exploration re-test every few rounds
  // (the exploration budget, 1 % of the time): a re-test is one round of the 50.
  CHECK(drafted_late <= 20);
  CHECK(a.stats().guarded > 0);
  CHECK(a.stats().accept[0] < 0.7);
  // Without the guard's shortcut (no rounds of the new regime drafted by choice) the estimate alone falls.
  AdaptiveDrafts b(2);
  for (int i = 0; i < 100; ++i) feed(b, 2, flat, 0.05, 2);
  for (int i = 0; i < 60; ++i) {
    b.record_round(2, 0, 1);  // observed rounds with no draft accepted
  }
  CHECK(b.stats().accept[0] < 0.2);
}

namespace {
// A 2-row window that usually costs a step but every fourth call nine: its median says drafting pays
// nearly double, the rounds as a whole commit fewer tokens per second than plain steps.
int spiky_calls = 0;
double spiky(int m) {
  if (m == 2) return ++spiky_calls % 4 == 0 ? 9.0 : 1.0;
  return static_cast<double>(m);
}
}  // namespace

TEST(the_realized_gain_guard_stops_drafting_that_loses) {
  spiky_calls = 0;
  AdaptiveDrafts a(1);
  std::vector<int> ns;
  for (int i = 0; i < 600; ++i) ns.push_back(feed(a, 1, spiky, 0.05, 1));
  const auto s = a.stats();
  CHECK(s.estimated_gain > 0.99);
  CHECK(s.guarded > 400);  // regular rounds run as plain steps
  int drafted = 0;
  for (std::size_t i = 100; i < ns.size(); ++i) drafted += ns[i] > 0;
  CHECK(drafted < 60);  // re-tests and exploration only
  CHECK(s.measured_gain > 0.9);
  // The windows turn cheap: once the guard's interval ends drafting is measured afresh and resumes.
  int late = 0;
  for (int i = 0; i < 600; ++i)
    late += feed(a, 1, [](int m) { return m == 2 ? 1.0 : static_cast<double>(m); }, 0.05, 1) > 0 && i >= 400;
  CHECK(late > 180);
  // The same costs without spikes pay: nothing guarded.
  AdaptiveDrafts b(1);
  for (int i = 0; i < 600; ++i) feed(b, 1, [](int m) { return m == 2 ? 1.0 : static_cast<double>(m); }, 0.05, 1);
  CHECK_EQ(b.stats().guarded, 0);
  CHECK(b.stats().measured_gain > 1.8);
}

TEST(recent_median_ignores_an_outlier) {
  strata::draft::RecentMedian m;
  CHECK(m.empty());
  CHECK_NEAR(m.value(), 0.0, 0.0);
  m.add(50.0);  // a cold first call
  m.add(1.0);
  m.add(1.2);
  CHECK_NEAR(m.value(), 1.2, 1e-12);
  CHECK_NEAR(m.min(), 1.0, 0.0);
  m.add(0.8);
  CHECK_NEAR(m.value(), 1.1, 1e-12);  // even count: mean of the middle two
  CHECK_NEAR(m.min(), 0.8, 0.0);
  for (int i = 0; i < 7; ++i) m.add(2.0);
  CHECK_NEAR(m.min(), 0.8, 0.0);  // still among the last 8
  m.add(2.0);
  CHECK_NEAR(m.value(), 2.0, 1e-12);  // only the last 8 samples count
  CHECK_NEAR(m.min(), 2.0, 0.0);      // the median and the minimum are kept as samples come (cached)
}

TEST(recent_median_matches_the_median_of_the_last_samples) {
  // The sorted copy kept by insertion against the definition: the median and the minimum of the last
  // kRecent samples, over random sequences with repeated values (ties leave the ring in any order).
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> pick(0, 9);
  for (int trial = 0; trial < 50; ++trial) {
    strata::draft::RecentMedian m;
    std::vector<double> all;
    for (int i = 0; i < 40; ++i) {
      const double x = 0.25 * pick(gen);
      m.add(x);
      all.push_back(x);
      std::vector<double> last(all.end() - std::min<std::ptrdiff_t>(all.size(), strata::draft::RecentMedian::kRecent),
                               all.end());
      std::sort(last.begin(), last.end());
      const std::size_t n = last.size();
      const double median = n % 2 == 1 ? last[n / 2] : 0.5 * (last[n / 2 - 1] + last[n / 2]);
      CHECK_NEAR(m.value(), median, 0.0);
      CHECK_NEAR(m.min(), last[0], 0.0);
    }
  }
}

TEST(bad_max_drafts_is_an_error) {
  bool threw = false;
  try {
    AdaptiveDrafts a(0);
  } catch (const strata::Error&) {
    threw = true;
  }
  CHECK(threw);
}

TEST(a_cold_first_probe_round_does_not_make_drafting_hopeless) {
  // A session's first draft step and window are slower than the rest: the hopeless test takes the
  // fastest sample of each, so the second probe round decides.
  AdaptiveDrafts a(2);
  const double draft[2] = {0.7, 0.1}, window[2] = {1.9, 1.3};
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(a.choose(2), 1);
    a.record_draft(1, draft[i]);
    a.record_verify(2, window[i]);
    a.record_round(1, 1, 2);
  }
  CHECK_EQ(a.choose(2), 0);
  a.record_plain(0.9, false);
  a.record_round(0, 0, 1);
  CHECK(!a.hopeless());      // 0.1 + 1.3 < 2 · 0.9; the first round alone (0.7 + 1.9) would say hopeless
  CHECK_EQ(a.choose(2), 2);  // the warm-up starts
  AdaptiveDrafts b(2);       // both probe rounds slow: hopeless
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(b.choose(2), 1);
    b.record_draft(1, draft[0]);
    b.record_verify(2, window[0]);
    b.record_round(1, 1, 2);
  }
  CHECK_EQ(b.choose(2), 0);
  b.record_plain(0.9, false);
  b.record_round(0, 0, 1);
  CHECK(b.hopeless());
  CHECK_EQ(b.choose(2), 0);
}

namespace {
double convex(int m) { return 0.8 + 0.3 * m * m; }  // each extra row costs more than the one before
}  // namespace

TEST(counts_that_cannot_pay_are_left_out_of_warmup_and_exploration) {
  // Plain step 1.1, draft step 0.02: one draft can pay (0.02 + 2.0 < 2.2), two and three cannot even
  // if every draft were accepted (0.04 + 3.5 >= 3.3, 0.06 + 5.6 >= 4.4).
  AdaptiveDrafts a(3);
  std::vector<int> ns;
  for (int i = 0; i < 400; ++i) ns.push_back(feed(a, 3, convex, 0.02, 3, 1.1));
  CHECK((std::vector<int>(ns.begin(), ns.begin() + 3) == std::vector<int>{1, 1, 0}));  // the probe
  // Warm-up: 3 runs (only extrapolated from the 2-row window, it looked viable), then 2 is ruled out
  // by the line through the measured sizes; the second pass runs 1 and plain steps only.
  CHECK((std::vector<int>(ns.begin() + 3, ns.begin() + 11) == std::vector<int>{3, 0, 1, 0, 0, 0, 1, 0}));
  CHECK(a.viable(1));
  CHECK(!a.viable(2));
  CHECK(!a.viable(3));
  CHECK(!a.hopeless());
  for (std::size_t i = 11; i < ns.size(); ++i) CHECK(ns[i] <= 1);  // never 2 or 3 again
  int one = 0;
  for (std::size_t i = 11; i < ns.size(); ++i) one += ns[i] == 1;
  CHECK(one > 350);  // all-accepted single drafts pay: 2 tokens for 2.02 against 1.1 per plain step
}

TEST(seeded_with_hopeless_costs_the_probe_drafts_nothing) {
  // An earlier run measured every window row at a whole step: drafting cannot pay.
  AdaptiveDrafts first(3);
  for (int i = 0; i < 40; ++i) feed(first, 3, linear, 0.1, 3, 0.9);
  CHECK(first.hopeless());
  AdaptiveDrafts a(3);
  a.seed(first.stats());
  CHECK(a.stats().seeded);
  CHECK(a.hopeless());
  std::vector<int> ns;
  for (int i = 0; i < 300; ++i) ns.push_back(feed(a, 3, linear, 0.1, 3, 0.9));
  for (int i = 0; i < AdaptiveDrafts::kExploreMax - 1; ++i) CHECK_EQ(ns[static_cast<std::size_t>(i)], 0);
  int drafted = 0;
  for (int n : ns) drafted += n > 0;
  CHECK_EQ(drafted, 1);  // one exploring round, at the longest interval
  // Costs that can pay, every size measured: no probe, the economics draft from the first round.
  AdaptiveDrafts good(3);
  for (int i = 0; i < 40; ++i) feed(good, 3, flat, 0.05, 3);
  AdaptiveDrafts b(3);
  b.seed(good.stats());
  CHECK(!b.hopeless());
  CHECK(b.choose(3) > 0);
  CHECK_THROWS(b.seed(good.stats()));  // only before the first round
}

TEST(a_seed_without_the_probes_costs_does_not_skip_the_probe) {
  // Plain steps alone (the costs a seeded session that drafted nothing measured) extrapolate every
  // window row to a whole step: "hopeless" from that would never be re-measured, so the probe runs.
  strata::draft::AdaptiveStats prior = prior_costs(3, 1.0, 0.0, 0.0, 0.9);
  AdaptiveDrafts a(3);
  a.seed(prior);
  CHECK(a.stats().seeded);
  CHECK(a.hopeless());
  CHECK_EQ(a.choose(3), 1);  // the probe drafts
  // With the draft step and the 2-row window it measures, the same verdict skips it.
  prior.draft_step_s = 0.1;
  prior.verify_s[2] = 2.0;
  AdaptiveDrafts b(3);
  b.seed(prior);
  CHECK(b.hopeless());
  CHECK_EQ(b.choose(3), 0);
}

TEST(stats_count_only_the_samples_a_session_measured) {
  // Seeds are not samples of this session: the cost cache stores a cost only when it was measured.
  AdaptiveDrafts a(2);
  a.seed(prior_costs(2, 1.0, 2.0, 0.1, 0.9));
  auto s = a.stats();
  CHECK_EQ(s.draft_samples, 0);
  CHECK_EQ(s.plain_samples, 0);
  CHECK_EQ(s.verify_samples[1], 0);
  CHECK_EQ(s.verify_samples[2], 0);
  CHECK(s.verify_s[2] > 0.0);  // the seed still stands in for the estimate
  CHECK_EQ(a.choose(2), 0);    // hopeless seed: the probe's first round is a plain step
  a.record_plain(0.9, a.encode_plain());
  a.record_round(0, 0, 1);
  a.record_draft(2, 0.2);
  a.record_verify(3, 2.5);
  s = a.stats();
  CHECK_EQ(s.draft_samples, 1);
  CHECK_EQ(s.plain_samples + s.verify_samples[1], 1);
  CHECK_EQ(s.verify_samples[2], 0);
  CHECK_EQ(s.verify_samples[3], 1);
}

TEST(a_session_of_plain_steps_estimates_no_gain_whatever_the_seed) {
  // A seed from a quiet run (c_verify(1) 0.1 s) and bare plain steps measured under load (1 s): the
  // economics price a plain step at the cheaper of the two, and a plain choice is then a gain of 1.0,
  // not c_plain / c_verify(1). (--stats printed 8.60x for such a run before.)
  AdaptiveDrafts a(1);
  a.seed(prior_costs(1, 0.1, 0.4, 0.2, 0.1));
  CHECK(a.hopeless());
  int drafted = 0;
  for (int i = 0; i < 100; ++i) drafted += feed(a, 1, linear, 2.0, 1, 1.0) > 0;
  CHECK_EQ(drafted, 0);
  const auto s = a.stats();
  CHECK(s.verify_samples[1] < 50);  // mostly bare steps: the seeded c_verify(1) still counts
  CHECK_NEAR(s.estimated_gain, 1.0, 1e-9);
}

TEST(a_seed_with_every_cost_skips_the_probe_and_the_warmup) {
  // Every size measured by an earlier run: the session starts with the economics (plain steps at the
  // prior's acceptance), explores at kExploreEvery, and a streak of exploring rounds that pay hands over
  // to regular drafting rounds.
  strata::draft::AdaptiveStats prior = prior_costs(3, 0.6, 0.7, 0.1, 0.5);
  prior.verify_s[3] = 0.8;
  prior.verify_s[4] = 0.9;
  AdaptiveDrafts a(3, /*skip_cold_samples=*/true);
  a.seed(prior);
  std::vector<int> ns;
  for (int i = 0; i < 200; ++i) {
    const int n = a.choose(3);
    if (n == 0) {
      a.record_plain(0.5, a.encode_plain());
    } else {
      a.record_draft(n + (n < 3 ? 1 : 0), 0.1 * (n + (n < 3 ? 1 : 0)));
      a.record_verify(n + 1, 0.5 + 0.1 * n);
    }
    a.record_round(n, n, n + 1);  // every draft accepted
    ns.push_back(n);
  }
  for (int i = 0; i < AdaptiveDrafts::kExploreEvery - 1; ++i) CHECK_EQ(ns[static_cast<std::size_t>(i)], 0);
  CHECK(ns[AdaptiveDrafts::kExploreEvery - 1] > 0);  // the first exploring round
  int drafting = 0;
  for (std::size_t i = 60; i < ns.size(); ++i) drafting += ns[i] == 3;
  CHECK(drafting > 130);  // all accepted, 4 tokens for 0.9 + 0.3 s against 0.5 s each: drafting from then on
}

TEST(cheap_exploration_comes_often_while_plain_steps_rule) {
  // Memory-bound costs (a window about one step): while nothing is accepted, plain steps rule, and an
  // exploring round loses only its extra rows' and draft steps' share of a step, so the exploration budget
  // brings exploring rounds every few rounds instead of every 32-256; once drafts are accepted again,
  // drafting resumes within a few rounds.
  AdaptiveDrafts a(3);
  for (int i = 0; i < 40; ++i) feed(a, 3, flat, 0.01, 0);
  std::vector<int> explored;
  for (int i = 0; i < 200; ++i)
    if (feed(a, 3, flat, 0.01, 0) > 0) explored.push_back(i);
  CHECK(explored.size() >= 8);
  for (std::size_t j = 1; j < explored.size(); ++j) CHECK(explored[j] - explored[j - 1] <= 16);
  int first = -1, late = 0;
  for (int i = 0; i < 100; ++i) {
    const int n = feed(a, 3, flat, 0.01, 3);
    if (n > 0 && first < 0) first = i;
    late += n == 3 && i >= 50;
  }
  CHECK(first >= 0 && first <= 16);
  CHECK(late >= 45);
}

namespace {
double one_cheap_row(int m) { return m == 1 ? 1.0 : m == 2 ? 1.03 : static_cast<double>(m) - 1.0; }
}  // namespace

TEST(each_draft_count_is_explored_within_its_own_share_of_the_budget) {
  // A second row costs 3 % of a step, a third and fourth a whole step each: with nothing accepted, one draft
  // loses almost nothing against a plain step and three lose two steps, so one draft is explored often and
  // three rarely (a single interval for the count run longest ago explored each as often as the others).
  AdaptiveDrafts a(3);
  for (int i = 0; i < 40; ++i) feed(a, 3, one_cheap_row, 0.01, 0);
  std::array<int, 4> explored{};
  int last_one = -1, longest_gap = 0;
  for (int i = 0; i < 1000; ++i) {
    const int n = feed(a, 3, one_cheap_row, 0.01, 0);
    ++explored[static_cast<std::size_t>(n)];
    if (n == 1) {
      if (last_one >= 0) longest_gap = std::max(longest_gap, i - last_one);
      last_one = i;
    }
  }
  CHECK(explored[1] >= 20);
  CHECK(explored[1] >= 4 * std::max(explored[3], 1));
  CHECK(longest_gap <= 2 * AdaptiveDrafts::kExploreEvery);
  // What exploring lost stays near the budget: (C_n - 1 token's worth) per exploring round, in plain steps.
  const double lost = explored[1] * (2 * 0.01 + 0.03) + explored[2] * (3 * 0.01 + 1.0) + explored[3] * (3 * 0.01 + 2.0);
  CHECK(lost / 1000.0 < 2.0 * AdaptiveDrafts::kExploreBudget);
}

TEST(exploring_rounds_that_cost_more_than_priced_come_less_often) {
  // Rounds fed as the speculator times them: record_period gets each round's whole period (its timed parts,
  // a per-round overhead and, after a draft round, `extra` seconds it did not time: the drafter's catch-up
  // encoding). Nothing is accepted, so plain steps rule and only exploring rounds draft. With the catch-up
  // costing two plain steps, an exploring round loses two steps more than the economics price it, and the
  // budget spaces them at the longest interval; without it, at the budget's intervals for the priced loss.
  auto explorations = [](double extra, std::vector<int>& at) {
    AdaptiveDrafts a(3);
    double period = -1.0;
    for (int i = 0; i < 800; ++i) {
      if (period >= 0.0) a.record_period(period);
      const int n = a.choose(3);
      double t = 0.0;
      if (n > 0) {
        a.record_draft(n, 0.05 * n);
        a.record_verify(n + 1, half_shared(n + 1));
        t = 0.05 * n + half_shared(n + 1) + extra;
      } else {
        const bool enc = a.encode_plain();
        a.record_plain(half_shared(1), enc);
        t = half_shared(1);
      }
      a.record_round(n, 0, 1);
      period = t + 0.01;
      if (n > 0 && i >= 60) at.push_back(i);
    }
    return a.stats();
  };
  std::vector<int> cheap, dear;
  explorations(0.0, cheap);
  const auto s = explorations(2.0, dear);
  CHECK(s.overhead_s < 0.02);  // the catch-up is not taken for every round's overhead
  CHECK(cheap.size() >= 4);
  CHECK(dear.size() < cheap.size());
  for (std::size_t j = 1; j < dear.size(); ++j) CHECK_EQ(dear[j] - dear[j - 1], AdaptiveDrafts::kExploreMax);
  for (std::size_t j = 1; j < cheap.size(); ++j) CHECK(cheap[j] - cheap[j - 1] < AdaptiveDrafts::kExploreMax);
}

TEST(low_peak_probabilities_hold_exploration_back) {
  // Rounds as `feed` runs them (nothing ever accepted, so plain steps rule), each plain step also recording the
  // peak probability of its sampling distribution. Windows at half a step a row past the first and draft steps
  // at 0.05 leave every count viable at perfect acceptance; with peaks of 0.5 not even drafts accepted at the
  // peak could pay (R_1..3 = 1.5, 1.75, 1.875 against 1.55, 2.1, 2.65 plain steps), so no exploring round runs
  // once kPeakMin peaks are in. With peaks of 1 (greedy verification) the bound says nothing: exploration as
  // without it. Peaks that rise later (a predictable stretch) let it resume within a window of peaks.
  auto run = [](double (*peak_at)(int), std::vector<int>& explored) {
    AdaptiveDrafts a(3);
    for (int i = 0; i < 600; ++i) {
      const int n = feed(a, 3, half_shared, 0.05, 0);
      if (n == 0) a.record_peak(peak_at(i));
      if (n > 0 && i >= AdaptiveDrafts::kProbeRounds + AdaptiveDrafts::kWarmupPasses * 4) explored.push_back(i);
    }
    return a.stats();
  };
  std::vector<int> low, greedy, rising;
  const auto s_low = run([](int) { return 0.5; }, low);
  const auto s_greedy = run([](int) { return 1.0; }, greedy);
  const auto s_rising = run([](int i) { return i < 400 ? 0.5 : 0.98; }, rising);
  CHECK(s_rising.peak_held > 0);
  CHECK(low.empty());
  CHECK(s_low.peak_held > 400);  // every round from the first due one (31) on asks again and is held
  CHECK_NEAR(s_low.peak, 0.5, 1e-9);
  CHECK(!greedy.empty());
  CHECK_EQ(greedy[0], AdaptiveDrafts::kExploreEvery - 1);  // as plain_steps_when_drafts_are_rarely_accepted
  CHECK_EQ(s_greedy.peak_held, 0);
  CHECK(!rising.empty());
  CHECK(rising[0] >= 400 && rising[0] < 400 + AdaptiveDrafts::kPeakWindow);
  // A peak window the bound cannot judge yet (fewer than kPeakMin) changes nothing.
  AdaptiveDrafts fresh(3);
  for (int i = 0; i < AdaptiveDrafts::kPeakMin - 1; ++i) fresh.record_peak(0.01);
  CHECK(!fresh.peaks_rule_out(3));
  CHECK_NEAR(fresh.peak_tokens(3), 4.0, 1e-12);
}

TEST(exploration_intervals_do_not_shrink_in_a_calls_last_rounds) {
  // Calls of 64 rounds, fed as the session runs them: the last rounds fit fewer drafts (k_cap 2, 1, then 0,
  // max_tokens being near) and nothing is ever accepted, so plain steps rule and only exploring rounds draft.
  // The budget's intervals are those of all three counts whatever fits: with them computed over the counts
  // that fit, one draft (a third of the budget each otherwise) was due at nearly every call's end.
  AdaptiveDrafts a(3);
  int tail = 0, rest = 0;
  for (int call = 0; call < 24; ++call)
    for (int r = 0; r < 64; ++r) {
      const int k_cap = std::min(3, 63 - r);
      const int n = feed(a, k_cap, half_shared, 0.05, 0);
      if (call >= 2 && n > 0) (k_cap < 3 ? tail : rest) += 1;
    }
  CHECK(rest >= 3);
  CHECK_EQ(tail, 0);
}

TEST(rounds_that_never_fit_every_count_still_explore) {
  // A caller that never leaves room for more than one draft (k_cap 1 of k = 3): the counts that never fit are
  // always the most overdue, and one draft is still explored on its own interval.
  AdaptiveDrafts a(3);
  int explored = 0;
  for (int i = 0; i < 800; ++i) {
    const int n = feed(a, 1, half_shared, 0.05, 0);
    CHECK(n <= 1);
    explored += i >= 40 && n > 0;
  }
  CHECK(explored >= 3);
}

TEST(peaks_of_another_temperature_are_forgotten) {
  // Low peaks recorded while sampling at 0.7 rule drafting out; a greedy call after it (peak context 0) starts
  // from no peaks, so nothing is ruled out before its own peaks say so.
  AdaptiveDrafts a(3);
  for (int i = 0; i < 40; ++i) feed(a, 3, half_shared, 0.05, 0);
  a.peak_context(0.7);
  for (int i = 0; i < AdaptiveDrafts::kPeakWindow; ++i) a.record_peak(0.3);
  CHECK(a.peaks_rule_out(3));
  CHECK_NEAR(a.peak_tokens(1), 1.3, 1e-9);
  a.peak_context(0.7);  // the same context keeps them
  CHECK(a.peaks_rule_out(3));
  a.peak_context(0.0);
  CHECK(!a.peaks_rule_out(3));
  CHECK_NEAR(a.peak_tokens(3), 4.0, 1e-12);
  CHECK(!a.peaks_rule_out(0));  // no count to judge
}

namespace {
// Rounds as the speculator runs them under verification `key` (0 = greedy, else the sampling temperature):
// each plain step records `peak_at(i)` (greedy: the peak of the logits at temperature 1, the trigger's
// predictor; sampling: the bound). Drafts are accepted up to accept_at(i). Returns the draft counts chosen.
std::vector<int> run_peaks(AdaptiveDrafts& a, double key, int rounds, double (*peak_at)(int), int (*accept_at)(int)) {
  std::vector<int> chosen;
  for (int i = 0; i < rounds; ++i) {
    a.peak_context(key);
    const int n = feed(a, 3, half_shared, 0.05, accept_at(i));
    if (n == 0 && peak_at(i) >= 0.0) a.record_peak(peak_at(i));  // < 0: none recorded
    chosen.push_back(n);
  }
  return chosen;
}
int drafting_rounds(const std::vector<int>& chosen, int from, int to) {
  int c = 0;
  for (int i = from; i < to; ++i) c += chosen[static_cast<std::size_t>(i)] > 0;
  return c;
}
}  // namespace

TEST(high_greedy_peaks_trigger_a_trial_that_hands_over_to_drafting) {
  // Greedy verification. For 300 rounds no draft is accepted and the target is unsure (peaks 0.3): plain steps
  // rule and exploration backs off to its longest intervals. Then the text turns predictable: every draft is
  // accepted and the target's peaks are 0.97. The peaks predict that three drafts pay (R_3 ≈ 3.8 for 2.65 plain
  // steps), so a trial runs within the trigger's interval and drafting takes over; without peaks (the control)
  // drafting waits for the next exploring round.
  auto low_then_high = [](int i) { return i < 300 ? 0.3 : 0.97; };
  auto none_then_all = [](int i) { return i < 300 ? 0 : 3; };
  AdaptiveDrafts trig(3), control(3);
  const auto with = run_peaks(trig, 0.0, 500, low_then_high, none_then_all);
  const auto without = run_peaks(control, 0.0, 500, [](int) { return -1.0; }, none_then_all);
  const auto s = trig.stats();
  CHECK(s.peak_triggered >= 1);
  CHECK_EQ(control.stats().peak_triggered, 0);
  CHECK_EQ(s.peak_held, 0);  // greedy: the peaks predict, they never hold exploration back
  CHECK(drafting_rounds(with, 300, 300 + 2 * AdaptiveDrafts::kTriggerEvery + AdaptiveDrafts::kTrialRounds) >= 10);
  CHECK(drafting_rounds(with, 400, 500) >= 95);  // regular drafting since
  CHECK(drafting_rounds(with, 300, 500) > drafting_rounds(without, 300, 500) + 40);
  // Low peaks alone trigger nothing: no trial in the first 300 rounds.
  CHECK(drafting_rounds(with, 60, 300) == drafting_rounds(without, 60, 300));
}

TEST(a_trial_that_does_not_pay_backs_the_trigger_off) {
  // The target is sure of itself (peaks 0.97) but the drafter never agrees: each trial (kTrialRounds exploring
  // rounds judged together) loses, and the trigger's interval doubles up to kExploreMax.
  AdaptiveDrafts a(3);
  const auto chosen = run_peaks(a, 0.0, 1200, [](int) { return 0.97; }, [](int) { return 0; });
  const auto s = a.stats();
  CHECK(s.peak_triggered >= 2);
  CHECK(s.peak_triggered <= 8);  // 32, 64, 128, 256, 256, ... rounds apart
  CHECK(drafting_rounds(chosen, 100, 1200) <= static_cast<int>(s.peak_triggered) * AdaptiveDrafts::kTrialRounds + 12);
}

TEST(sampling_peaks_bound_and_never_trigger) {
  // Verification by sampling: high peaks are only a bound (a draft is accepted with at most the peak), so they
  // trigger nothing, whatever they are.
  AdaptiveDrafts a(3);
  run_peaks(a, 0.7, 600, [](int) { return 0.99; }, [](int) { return 0; });
  CHECK_EQ(a.stats().peak_triggered, 0);
}

TEST(a_seeded_session_explores_the_cheapest_count_first_when_sampling) {
  // A seed with every cost (no probe, no warm-up), nothing accepted: plain steps rule, and at the first exploring
  // round every count is equally overdue. Verifying by sampling (peaks high enough not to hold it back) it runs
  // one draft, the cheapest round; greedy, three (a predictable text's streak starts at the largest count).
  auto first_exploring = [](double key) {
    // Draft steps at a tenth of a step: every count's exploring round loses enough for kExploreEvery rounds.
    strata::draft::AdaptiveStats prior = prior_costs(3, 1.0, 1.5, 0.1, 1.0);
    prior.verify_s[3] = 2.0;
    prior.verify_s[4] = 2.5;
    AdaptiveDrafts a(3, /*skip_cold_samples=*/true);
    a.seed(prior);
    for (int i = 0; i < 2 * AdaptiveDrafts::kExploreEvery; ++i) {
      a.peak_context(key);
      const int n = feed(a, 3, half_shared, 0.1, 0);
      if (n == 0 && key > 0.0) a.record_peak(0.99);
      if (n > 0) return std::pair{i, n};
    }
    return std::pair{-1, 0};
  };
  const auto sampling = first_exploring(0.7), greedy = first_exploring(0.0);
  CHECK_EQ(sampling.first, AdaptiveDrafts::kExploreEvery - 1);
  CHECK_EQ(sampling.second, 1);
  CHECK_EQ(greedy.first, AdaptiveDrafts::kExploreEvery - 1);
  CHECK_EQ(greedy.second, 3);
}

namespace {

// Every cost an earlier run measured (windows of 2..4 rows, the draft step, the bare plain step), and its
// measured acceptance in one verification context.
strata::draft::AdaptiveStats seeded_with_acceptance(double key, double accept) {
  strata::draft::AdaptiveStats prior = prior_costs(3, 0.0, 0.7, 0.1, 0.5);
  prior.verify_s[3] = 0.8;
  prior.verify_s[4] = 0.9;
  prior.accept_priors[0].key = key;
  prior.accept_priors[0].accept.fill(accept);
  return prior;
}

}  // namespace

TEST(a_seeded_acceptance_prior_drafts_from_the_first_round_in_its_own_context) {
  // Pooled acceptance 0.95 from earlier greedy runs: 3 drafts commit ~3.7 tokens for 0.3 + 0.9 s against
  // 0.5 s a plain step, so the session drafts at once instead of pricing drafting at one half until its
  // first exploring round (kExploreEvery - 1).
  AdaptiveDrafts a(3, /*skip_cold_samples=*/true);
  a.seed(seeded_with_acceptance(0.0, 0.95));
  a.peak_context(0.0);
  CHECK_EQ(a.choose(3), 3);
  CHECK_NEAR(a.stats().accept[0], 0.95, 1e-9);
  // The same seed in another context (sampling at 0.7): the default prior, one half, and plain steps.
  AdaptiveDrafts b(3, /*skip_cold_samples=*/true);
  b.seed(seeded_with_acceptance(0.0, 0.95));
  b.peak_context(0.7);
  CHECK_EQ(b.choose(3), 0);
  CHECK_NEAR(b.stats().accept[0], 0.5, 1e-9);
}

TEST(under_a_seeded_prior_plain_steps_let_old_evidence_fade) {
  // Two rounds of rejected drafts pull the estimate far below the prior; each plain step after them
  // weighs that evidence by kPlainDecay, so the estimate climbs back toward the measured 0.9 and drafting
  // returns by itself. Without a measured prior the estimate stays where the evidence left it.
  auto run = [](bool with_prior) {
    strata::draft::AdaptiveStats prior = seeded_with_acceptance(0.0, 0.9);
    if (!with_prior) prior.accept_priors[0].key = -1.0;
    AdaptiveDrafts a(3);
    a.seed(prior);
    a.peak_context(0.0);
    for (int i = 0; i < 2; ++i) {
      a.choose(3);
      a.record_round(3, 0, 1);  // three drafts, none accepted
    }
    const double low = a.stats().accept[0];
    for (int i = 0; i < 60; ++i) a.record_round(0, 0, 1);  // plain steps
    return std::pair<double, double>(low, a.stats().accept[0]);
  };
  const auto [low, later] = run(true);
  CHECK(low < 0.65);
  CHECK(later > low + 0.1 && later < 0.9);
  const auto [low0, later0] = run(false);
  CHECK_NEAR(later0, low0, 1e-12);
}

TEST(an_unmeasured_plain_window_never_lowers_the_plain_step_cost) {
  // c_verify(1) unmeasured: the line through the 2- and 4-row windows puts it at 0.6 - 0.4 = 0.2 s, below
  // the bare plain step (0.5 s) it can never beat. C_0 is the plain step's, not the extrapolation's.
  AdaptiveDrafts a(3);
  a.record_plain(0.5, false);
  a.record_verify(2, 0.6);
  a.record_verify(4, 1.4);
  CHECK_NEAR(a.expected_cost(0), 0.5, 1e-12);
  a.record_verify(1, 0.45);  // measured: the cheaper of the two
  CHECK_NEAR(a.expected_cost(0), 0.45, 1e-12);
}

TEST(a_seed_with_two_window_sizes_skips_the_probe_and_the_warmup) {
  // A session that drafted three a round measured 3- and 4-row windows only: its seed still prices every
  // size (the line through them), so the next session starts with the economics, not the probe's one draft.
  strata::draft::AdaptiveStats prior = seeded_with_acceptance(0.0, 0.95);
  prior.verify_s[2] = 0.0;
  AdaptiveDrafts a(3, /*skip_cold_samples=*/true);
  a.seed(prior);
  a.peak_context(0.0);
  CHECK_EQ(a.choose(3), 3);
  // One size alone is not enough: the probe runs.
  prior.verify_s[3] = 0.0;
  AdaptiveDrafts b(3, /*skip_cold_samples=*/true);
  b.seed(prior);
  b.peak_context(0.0);
  CHECK_EQ(b.choose(3), 1);
}

TEST(a_seeded_cost_outweighs_one_slow_window) {
  // The seed counts as kSeedSamples samples: one slow window of a fresh process (after the skipped first)
  // leaves the median at the seed's 0.9 s; three more take it over.
  AdaptiveDrafts a(3);
  a.seed(seeded_with_acceptance(0.0, 0.95));
  const double base = a.expected_cost(3);  // 3 draft steps + the 4-row window (no overhead measured)
  CHECK_NEAR(base, 0.3 + 0.9, 1e-12);
  a.record_verify(4, 1.3);
  CHECK_NEAR(a.expected_cost(3), base, 1e-12);
  for (int i = 0; i < 3; ++i) a.record_verify(4, 1.3);
  CHECK(a.expected_cost(3) > base + 0.3);
}

TEST(judged_and_accepted_drafts_are_counted_per_context) {
  AdaptiveDrafts a(3);
  const double none = a.stats().accept_key;
  CHECK_EQ(none, -1.0);
  a.peak_context(0.0);
  a.choose(3);
  a.record_round(3, 1, 2);  // drafts 0 and 1 judged, draft 0 accepted
  a.record_round(4, 3, 4);  // a shadow round: steps 0..3 judged (k = 3 counts 0..2), 0..2 accepted
  auto s = a.stats();
  CHECK_EQ(s.accept_key, 0.0);
  CHECK_EQ(s.judged[0], 2);
  CHECK_EQ(s.judged[1], 2);
  CHECK_EQ(s.judged[2], 1);
  CHECK_EQ(s.accepted[0], 2);
  CHECK_EQ(s.accepted[1], 1);
  CHECK_EQ(s.accepted[2], 1);
  a.record_round(0, 0, 1);  // plain steps count nothing
  s = a.stats();
  CHECK_EQ(s.judged[0], 2);
  a.peak_context(0.7);  // another context: the totals start again with its first verified round
  a.record_round(1, 0, 1);
  s = a.stats();
  CHECK_NEAR(s.accept_key, 0.7, 1e-12);
  CHECK_EQ(s.judged[0], 1);
  CHECK_EQ(s.accepted[0], 0);
  CHECK_EQ(s.judged[1], 0);
}

TEST(the_guard_does_not_judge_a_sessions_first_rounds) {
  // A seeded session that drafts from its first round: those rounds are slow (cold), four times a plain
  // step's cost per token, and yet the guard does not stop drafting before kGuardSkipRounds.
  AdaptiveDrafts a(3, /*skip_cold_samples=*/true);
  a.seed(seeded_with_acceptance(0.0, 0.95));
  a.peak_context(0.0);
  // Judged from its second round (the first is cold, not a sample), the guard held drafting back from
  // round 6 on; the economics alone keep drafting through round 7 (the seed outweighs the slow windows).
  static_assert(AdaptiveDrafts::kGuardSkipRounds >= 8);
  int drafted = 0;
  for (int i = 0; i < 8; ++i) {
    const int n = a.choose(3);
    drafted += n > 0;
    if (n > 0) {
      a.record_draft(n, 0.1 * n);
      a.record_verify(n + 1, 8.0);
    } else {
      a.record_plain(0.5, a.encode_plain());
    }
    a.record_round(n, n, n + 1);
  }
  CHECK_EQ(drafted, 8);
  const int64_t guarded = a.stats().guarded;
  CHECK_EQ(guarded, 0);
}

TEST(a_step_the_seed_has_no_rate_for_keeps_the_default_prior) {
  // The seed measured step 0 only (-1: fewer than MIN_JUDGED judged drafts of the later steps): those keep
  // one pseudo-draft at one half, learn at the default speed, and do not fade in plain steps.
  strata::draft::AdaptiveStats prior = seeded_with_acceptance(0.0, 0.9);
  prior.accept_priors[0].accept[1] = -1.0;
  prior.accept_priors[0].accept[2] = -1.0;
  AdaptiveDrafts a(3);
  a.seed(prior);
  a.peak_context(0.0);
  auto s = a.stats();
  CHECK_NEAR(s.accept[0], 0.9, 1e-12);
  CHECK_NEAR(s.accept[1], 0.5, 1e-12);
  a.choose(3);
  a.record_round(3, 3, 4);  // every draft accepted
  s = a.stats();
  CHECK_NEAR(s.accept[0], (1.0 + 4.0 * 0.9) / 5.0, 1e-12);
  CHECK_NEAR(s.accept[1], (1.0 + 0.5) / 2.0, 1e-12);
  for (int i = 0; i < 30; ++i) a.record_round(0, 0, 1);
  s = a.stats();
  CHECK_NEAR(s.accept[1], 0.75, 1e-12);          // no fade toward a prior nobody measured
  CHECK(s.accept[0] < (1.0 + 4.0 * 0.9) / 5.0);  // faded toward 0.9 from above
}

TEST(a_seed_set_after_the_context_still_applies_its_prior) {
  AdaptiveDrafts a(3);
  a.peak_context(0.0);
  a.seed(seeded_with_acceptance(0.0, 0.8));
  CHECK_NEAR(a.stats().accept[0], 0.8, 1e-12);
}

TEST(an_extrapolated_window_never_costs_less_than_a_plain_step) {
  // A seed of 3- and 4-row windows with a steep slope (0.5 s, then 1.0 s): the line would put a 2-row
  // window at 0.0 s; it is priced at the plain step (0.45 s) instead.
  strata::draft::AdaptiveStats prior = prior_costs(3, 0.0, 0.0, 0.1, 0.45);
  prior.verify_s[3] = 0.5;
  prior.verify_s[4] = 1.0;
  AdaptiveDrafts a(3);
  a.seed(prior);
  CHECK_NEAR(a.expected_cost(1), 2 * 0.1 + 0.45, 1e-12);  // the draft and its shadow, a plain step's window
}
