// sample_dist, sampling and verify_window (SPEC §2.8, R-12): formulas checked on hand-worked rows,
// the order of the stages, top-p's deepening sort against a full sort, the rng, greedy verification
// and the edge cases of exact speculative sampling. The Monte-Carlo test is test_sampling_mc.cpp.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cstring>
#include <array>
#include <chrono>
#include <cstdio>
#include <limits>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "strata/sampling/policy.h"
#include "strata/sampling/rng.h"
#include "strata/sampling/sample_dist.h"
#include "strata/sampling/verify.h"

using namespace strata::sampling;

namespace {

std::vector<float> dist_of(const std::vector<float>& logits, const SamplingPolicy& p, std::vector<int32_t> history = {},
                           std::vector<int32_t> inputs = {}) {
  SampleWorkspace ws;
  std::vector<float> out(logits.size());
  sample_dist(logits.data(), static_cast<int>(logits.size()), p, history, inputs, out.data(), ws);
  return out;
}

std::vector<double> softmax(const std::vector<double>& l) {
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> e(l.size());
  double s = 0.0;
  for (size_t i = 0; i < l.size(); ++i) s += (e[i] = std::isinf(l[i]) ? 0.0 : std::exp(l[i] - m));
  for (auto& x : e) x /= s;
  return e;
}

SamplingPolicy temp(float t) {
  SamplingPolicy p;
  p.temperature = t;
  return p;
}

}  // namespace

TEST(plain_softmax_and_temperature) {
  const std::vector<float> l = {1.0f, 2.0f, -0.5f, 0.0f};
  auto d = dist_of(l, temp(1.0f));
  auto ref = softmax({1.0, 2.0, -0.5, 0.0});
  for (size_t i = 0; i < l.size(); ++i) CHECK_NEAR(d[i], ref[i], 1e-7);
  d = dist_of(l, temp(0.5f));
  ref = softmax({2.0, 4.0, -1.0, 0.0});
  for (size_t i = 0; i < l.size(); ++i) CHECK_NEAR(d[i], ref[i], 1e-7);
  // temperature 0: one-hot at the argmax, ties to the lowest id
  d = dist_of({1.0f, 3.0f, 3.0f}, temp(0.0f));
  CHECK(d == (std::vector<float>{0.0f, 1.0f, 0.0f}));
}

TEST(top_k_keeps_k_with_ties_to_lowest_id) {
  SamplingPolicy p = temp(1.0f);
  p.top_k = 2;
  auto d = dist_of({3.0f, 1.0f, 3.0f, 3.0f}, p);
  CHECK_NEAR(d[0], 0.5, 1e-7);
  CHECK_NEAR(d[2], 0.5, 1e-7);
  CHECK_EQ(d[3], 0.0f);
  CHECK_EQ(d[1], 0.0f);
  p.top_k = 10;  // k >= V: off
  d = dist_of({0.0f, 0.0f}, p);
  CHECK_NEAR(d[1], 0.5, 1e-7);
}

TEST(penalties_formulas) {
  // rep 2: positive logits divided, negative multiplied; presence 0.5 subtracted once per distinct token.
  SamplingPolicy p = temp(1.0f);
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  const auto d = dist_of({2.0f, -1.0f, 0.5f, 0.0f}, p, {0, 0, 1}, {3});
  const auto ref = softmax({2.0 / 2 - 0.5, -1.0 * 2 - 0.5, 0.5, 0.0 - 0.5});
  for (size_t i = 0; i < 4; ++i) CHECK_NEAR(d[i], ref[i], 1e-7);
  // history and window inputs are one sequence
  const auto d2 = dist_of({2.0f, -1.0f, 0.5f, 0.0f}, p, {}, {0, 1, 0, 3});
  CHECK(d == d2);
  // penalty_last_n = 1: only the last token (3) is seen
  p.penalty_last_n = 1;
  const auto d3 = dist_of({2.0f, -1.0f, 0.5f, 0.0f}, p, {0, 0, 1}, {3});
  const auto ref3 = softmax({2.0, -1.0, 0.5, -0.5});
  for (size_t i = 0; i < 4; ++i) CHECK_NEAR(d3[i], ref3[i], 1e-7);
  p.penalty_last_n = 0;  // none
  const auto d4 = dist_of({2.0f, -1.0f, 0.5f, 0.0f}, p, {0, 0, 1}, {3});
  CHECK(d4 == dist_of({2.0f, -1.0f, 0.5f, 0.0f}, temp(1.0f)));
}

TEST(top_k_comes_before_penalties) {
  // Token 0 is in the top-2 and penalised below token 2, which top-k already removed: 2 stays out.
  SamplingPolicy p = temp(1.0f);
  p.top_k = 2;
  p.presence_penalty = 5.0f;
  const auto d = dist_of({3.0f, 2.5f, 2.0f}, p, {0});
  CHECK_EQ(d[2], 0.0f);
  const auto ref = softmax({3.0 - 5.0, 2.5});
  CHECK_NEAR(d[0], ref[0], 1e-7);
  CHECK_NEAR(d[1], ref[1], 1e-7);
  // Greedy sees the penalised logits.
  p.temperature = 0.0f;
  const auto g = dist_of({3.0f, 2.5f, 2.0f}, p, {0});
  CHECK_EQ(g[1], 1.0f);
}

TEST(min_p_after_temperature_equality_passes) {
  SamplingPolicy p = temp(1.0f);
  p.min_p = 1.0f;  // keeps exactly the tokens tied at the max (p == min_p · p_max passes)
  auto d = dist_of({1.0f, 1.0f, 0.99f}, p);
  CHECK_NEAR(d[0], 0.5, 1e-7);
  CHECK_NEAR(d[1], 0.5, 1e-7);
  CHECK_EQ(d[2], 0.0f);
  // ratio e^-1 = 0.3679: min_p 0.36 keeps it at T = 1, drops it at T = 0.5 (ratio e^-2)
  p.min_p = 0.36f;
  d = dist_of({1.0f, 0.0f}, p);
  CHECK(d[1] > 0.0f);
  p.temperature = 0.5f;
  d = dist_of({1.0f, 0.0f}, p);
  CHECK_EQ(d[1], 0.0f);
  CHECK_EQ(d[0], 1.0f);
}

TEST(top_p_smallest_prefix) {
  SamplingPolicy p = temp(1.0f);
  const std::vector<float> l = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  p.top_p = 0.45f;
  auto d = dist_of(l, p);
  CHECK_EQ(d[1], 1.0f);
  p.top_p = 0.75f;
  d = dist_of(l, p);
  CHECK_NEAR(d[1], 0.5 / 0.8, 1e-6);
  CHECK_NEAR(d[2], 0.3 / 0.8, 1e-6);
  CHECK_EQ(d[0], 0.0f);
  p.top_p = 0.85f;
  d = dist_of(l, p);
  CHECK(d[0] > 0.0f);
  // top-p runs over what min-p left: min-p drops 0.2 (< 0.5 · 0.5), then 0.75 of {0.5, 0.3} keeps both
  p.min_p = 0.5f;
  p.top_p = 0.75f;
  d = dist_of(l, p);
  CHECK_EQ(d[0], 0.0f);
  CHECK(d[2] > 0.0f);
}

TEST(top_p_deep_cut_matches_full_sort) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(0.0, 0.3);
  for (int trial = 0; trial < 20; ++trial) {
    const int V = 3000 + trial * 250;
    std::vector<float> l(static_cast<size_t>(V));
    for (auto& x : l) x = static_cast<float>(g(rng));
    if (trial % 4 == 0)
      for (int i = 0; i < V; i += 7) l[static_cast<size_t>(i)] = 0.125f;  // ties
    SamplingPolicy p = temp(0.9f);
    p.top_p = 0.3f + 0.033f * static_cast<float>(trial);
    const auto d = dist_of(l, p);
    // reference: full sort by (p desc, id asc) on the exact softmax
    std::vector<double> ld(l.begin(), l.end());
    for (auto& x : ld) x /= 0.9;
    const auto e = softmax(ld);
    std::vector<int> idx(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) {
      return e[static_cast<size_t>(a)] > e[static_cast<size_t>(b)] ||
             (e[static_cast<size_t>(a)] == e[static_cast<size_t>(b)] && a < b);
    });
    double cum = 0.0;
    size_t keep = 0;
    while (cum < static_cast<double>(p.top_p)) cum += e[static_cast<size_t>(idx[keep++])];
    size_t kept = 0;
    for (float x : d) kept += x > 0.0f;
    CHECK_EQ(kept, keep);
    for (size_t j = 0; j < keep; ++j)
      CHECK_NEAR(d[static_cast<size_t>(idx[j])], e[static_cast<size_t>(idx[j])] / cum, 1e-6);
  }
}

TEST(bad_inputs_are_errors) {
  SampleWorkspace ws;
  std::vector<float> out(3);
  const std::vector<float> nan_row = {0.0f, std::nanf(""), 1.0f};
  CHECK_THROWS(sample_dist(nan_row.data(), 3, temp(1.0f), {}, {}, out.data(), ws));
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> inf_row = {0.0f, inf, 1.0f};
  CHECK_THROWS(sample_dist(inf_row.data(), 3, temp(1.0f), {}, {}, out.data(), ws));
  const std::vector<float> dead = {-inf, -inf, -inf};
  CHECK_THROWS(sample_dist(dead.data(), 3, temp(1.0f), {}, {}, out.data(), ws));
  const std::vector<float> ok = {0.0f, 1.0f, 2.0f};
  SamplingPolicy pen = temp(1.0f);
  pen.presence_penalty = 1.0f;
  const std::vector<int32_t> bad_hist = {0, 7};
  CHECK_THROWS(sample_dist(ok.data(), 3, pen, bad_hist, {}, out.data(), ws));
  // -inf logits are masks, not errors
  const std::vector<float> masked = {-inf, 1.0f, -inf};
  sample_dist(masked.data(), 3, temp(1.0f), {}, {}, out.data(), ws);
  CHECK_EQ(out[1], 1.0f);
  SamplingPolicy p;
  p.temperature = -1.0f;
  CHECK_THROWS(validate(p));
  p = SamplingPolicy{};
  p.top_p = 0.0f;
  CHECK_THROWS(validate(p));
  p = SamplingPolicy{};
  p.min_p = 1.5f;
  CHECK_THROWS(validate(p));
  p = SamplingPolicy{};
  p.repetition_penalty = 0.0f;
  CHECK_THROWS(validate(p));
  p = SamplingPolicy{};
  p.penalty_last_n = -2;
  CHECK_THROWS(validate(p));
  validate(SamplingPolicy{});
}

TEST(rng_is_deterministic_and_restorable) {
  Rng a(42), b(42), c(43);
  CHECK_EQ(a.next(), b.next());
  CHECK(a.next() != c.next());
  const auto st = a.state();
  std::vector<uint64_t> first;
  for (int i = 0; i < 10; ++i) first.push_back(a.next());
  Rng d(0);
  d.set_state(st);
  for (int i = 0; i < 10; ++i) CHECK_EQ(d.next(), first[static_cast<size_t>(i)]);
  double s = 0.0, lo = 1.0, hi = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const double u = a.uniform();
    s += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  CHECK(lo >= 0.0 && hi < 1.0);
  CHECK_NEAR(s / 100000.0, 0.5, 0.01);
  Rng z(1);
  z.set_state({0, 0, 0, 0});
  CHECK(z.next() != 0 || z.next() != 0);
}

TEST(sample_from_and_excluding) {
  const std::vector<float> d = {0.25f, 0.0f, 0.5f, 0.25f};
  CHECK_EQ(sample_from(d.data(), 4, 0.0), 0);
  CHECK_EQ(sample_from(d.data(), 4, 0.2499), 0);
  CHECK_EQ(sample_from(d.data(), 4, 0.25), 2);
  CHECK_EQ(sample_from(d.data(), 4, 0.9999999), 3);
  CHECK_EQ(sample_excluding(d.data(), 4, 2, 0.0), 0);
  CHECK_EQ(sample_excluding(d.data(), 4, 2, 0.5), 3);
  CHECK_EQ(sample_excluding(d.data(), 4, 2, 0.49), 0);
  const std::vector<float> one = {0.0f, 1.0f, 0.0f};
  CHECK_EQ(sample_excluding(one.data(), 3, 1, 0.3), 1);
}

// The drawn token's place against a serial scan in long double: the mass before it is at most the target
// and the mass through it above (sample_from passes blocks of 64 ids whole with 8-lane sums, so where the
// target is within rounding of a boundary either neighbour may come; those draws are counted, not checked).
TEST(sample_from_passes_blocks_whole_and_draws_the_serial_scans_token) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  int checked = 0, near = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int V = 700 + static_cast<int>(rng() % 5000);
    std::vector<float> d(static_cast<size_t>(V));
    for (auto& x : d) x = static_cast<float>(uni(rng) * uni(rng));
    for (int i = 0; i < V; i += 3) d[static_cast<size_t>(i)] = 0.0f;                // zeros inside blocks
    for (int i = 128; i < std::min(V, 320); ++i) d[static_cast<size_t>(i)] = 0.0f;  // whole blocks without mass
    if (trial % 4 == 3)  // all the mass in the last blocks: long runs of blocks passed whole
      for (int i = 0; i < V - 100; ++i) d[static_cast<size_t>(i)] = 0.0f;
    const int32_t x = static_cast<int32_t>(rng() % static_cast<uint64_t>(V));  // excluded in the second half
    for (int draw = 0; draw < 200; ++draw) {
      const bool excl = draw >= 100;
      const double u = uni(rng);
      long double total = 0.0L;
      for (int i = 0; i < V; ++i)
        if (!(excl && i == x)) total += d[static_cast<size_t>(i)];
      if (excl && total == 0.0L) continue;
      const long double target = static_cast<long double>(u) * total;
      const int32_t t = excl ? sample_excluding(d.data(), V, x, u) : sample_from(d.data(), V, u);
      CHECK(t >= 0 && t < V);
      CHECK(d[static_cast<size_t>(t)] > 0.0f);
      if (excl) CHECK(t != x);
      long double before = 0.0L;
      for (int i = 0; i < t; ++i)
        if (!(excl && i == x)) before += d[static_cast<size_t>(i)];
      const long double through = before + d[static_cast<size_t>(t)];
      const long double tol = 1e-12L * total;
      if (std::fabs(static_cast<double>(target - before)) < tol ||
          std::fabs(static_cast<double>(through - target)) < tol) {
        ++near;
        continue;
      }
      CHECK(before <= target && target < through);
      ++checked;
    }
  }
  CHECK(checked > 4700);
  CHECK(near < 10);
}

TEST(greedy_verification_at_temperature_zero) {
  // Row argmaxes 2, 0, 1, 3. Drafts [2, 0, 5]: two kept, next = 1. The rng is not touched.
  const int V = 6;
  std::vector<float> logits(4 * V, 0.0f);
  logits[0 * V + 2] = 5.0f;
  logits[1 * V + 0] = 5.0f;
  logits[2 * V + 1] = 5.0f;
  logits[3 * V + 3] = 5.0f;
  Rng rng(9);
  const auto before = rng.state();
  SampleWorkspace ws;
  const std::vector<int32_t> hist = {4};
  std::vector<int32_t> drafts = {2, 0, 5};
  for (SpecSample mode : {SpecSample::Exact, SpecSample::Greedy}) {
    auto r = verify_window(logits.data(), V, drafts, temp(0.0f), mode, hist, rng, ws);
    CHECK_EQ(r.accepted, 2);
    CHECK_EQ(r.next_token, 1);
  }
  drafts = {2, 0, 1};
  auto r = verify_window(logits.data(), V, drafts, temp(0.0f), SpecSample::Exact, hist, rng, ws);
  CHECK_EQ(r.accepted, 3);
  CHECK_EQ(r.next_token, 3);
  CHECK(rng.state() == before);
  // The history fix: row 1 is penalised by draft 0 (a window input), flipping its argmax.
  SamplingPolicy pen = temp(0.0f);
  pen.presence_penalty = 10.0f;
  std::vector<float> l2(2 * V, 0.0f);
  l2[0 * V + 2] = 5.0f;
  l2[1 * V + 2] = 5.0f;
  l2[1 * V + 3] = 4.0f;
  const std::vector<int32_t> d1 = {2};
  r = verify_window(l2.data(), V, d1, pen, SpecSample::Exact, hist, rng, ws);
  CHECK_EQ(r.accepted, 1);
  CHECK_EQ(r.next_token, 3);
}

TEST(greedy_verification_is_each_rows_distribution_argmax) {
  // Temperature 0 takes each row's token as a plain step does (sample_logits, which skips the
  // distribution when no penalty applies); it must keep the documented rule: drafts kept while each
  // equals the argmax of its row's p_i (sample_dist over history ++ the drafts before it), the next
  // token that argmax. Random rows with ties and masks, with and without penalties and cuts.
  std::mt19937_64 gen(21);
  SampleWorkspace ws, ref_ws;
  std::vector<float> dist;
  for (int trial = 0; trial < 400; ++trial) {
    const int V = 3 + static_cast<int>(gen() % 300);
    const int k = static_cast<int>(gen() % 5);
    std::vector<float> logits(static_cast<size_t>((k + 1) * V));
    for (float& x : logits) {
      const uint64_t u = gen() % 16;
      x = u == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(gen() % 7) * 0.5f;  // ties
    }
    for (int i = 0; i <= k; ++i) logits[static_cast<size_t>(i * V) + gen() % static_cast<uint64_t>(V)] = 9.0f;
    SamplingPolicy pol = temp(0.0f);
    if (trial % 3 == 1) {
      pol.repetition_penalty = 1.5f;
      pol.presence_penalty = 4.0f;
    }
    if (trial % 4 == 2) pol.top_k = 1 + static_cast<int>(gen() % 8);
    const std::vector<int32_t> hist = {static_cast<int32_t>(gen() % static_cast<uint64_t>(V)),
                                       static_cast<int32_t>(gen() % static_cast<uint64_t>(V))};
    // Drafts: mostly each row's reference argmax, sometimes another token.
    std::vector<int32_t> drafts(static_cast<size_t>(k));
    dist.resize(static_cast<size_t>(V));
    int ref_accepted = k, ref_next = -1;
    for (int i = 0; i <= k; ++i) {
      sample_dist(logits.data() + static_cast<size_t>(i * V), V, pol, hist,
                  std::span<const int32_t>(drafts.data(), static_cast<size_t>(i)), dist.data(), ref_ws);
      const int32_t best = argmax(dist.data(), V);
      if (i == k) {
        ref_next = best;
        break;
      }
      drafts[static_cast<size_t>(i)] = gen() % 4 == 0 ? static_cast<int32_t>(gen() % static_cast<uint64_t>(V)) : best;
      if (drafts[static_cast<size_t>(i)] != best) {
        ref_accepted = i;
        ref_next = best;
        break;
      }
    }
    for (int i = ref_accepted + 1; i < k; ++i) drafts[static_cast<size_t>(i)] = 0;  // never judged
    Rng rng(5);
    const auto before = rng.state();
    for (SpecSample mode : {SpecSample::Exact, SpecSample::Greedy}) {
      const auto r = verify_window(logits.data(), V, drafts, pol, mode, hist, rng, ws);
      CHECK_EQ(r.accepted, ref_accepted);
      CHECK_EQ(r.next_token, ref_next);
    }
    CHECK(rng.state() == before);
  }
}

TEST(exact_verification_edges) {
  const int V = 4;
  SampleWorkspace ws;
  Rng rng(3);
  const std::vector<int32_t> hist = {0};
  // A draft with probability 1 is always kept; one with probability 0 never, and is never the next token.
  std::vector<float> sure(2 * V, -std::numeric_limits<float>::infinity());
  sure[1] = 0.0f;
  sure[V + 0] = 0.0f;
  sure[V + 2] = 0.0f;
  const std::vector<int32_t> d = {1};
  const std::vector<int32_t> zero = {3};
  int next0 = 0;
  for (int i = 0; i < 2000; ++i) {
    auto r = verify_window(sure.data(), V, d, temp(1.0f), SpecSample::Exact, hist, rng, ws);
    CHECK_EQ(r.accepted, 1);
    CHECK(r.next_token == 0 || r.next_token == 2);
    next0 += r.next_token == 0;
    r = verify_window(sure.data(), V, zero, temp(1.0f), SpecSample::Exact, hist, rng, ws);
    CHECK_EQ(r.accepted, 0);
    CHECK_EQ(r.next_token, 1);
  }
  CHECK(next0 > 900 && next0 < 1100);
  // Bad drafts are errors.
  const std::vector<int32_t> bad = {9};
  CHECK_THROWS(verify_window(sure.data(), V, bad, temp(1.0f), SpecSample::Exact, hist, rng, ws));
  // Same seed, same calls: same results (what session save/load relies on).
  Rng r1(77), r2(77);
  std::vector<float> flat(2 * V, 0.0f);
  for (int i = 0; i < 100; ++i) {
    auto a = verify_window(flat.data(), V, d, temp(0.8f), SpecSample::Exact, hist, r1, ws);
    auto b = verify_window(flat.data(), V, d, temp(0.8f), SpecSample::Exact, hist, r2, ws);
    CHECK_EQ(a.accepted, b.accepted);
    CHECK_EQ(a.next_token, b.next_token);
  }
}

TEST(top_k_paths_match_full_sort) {
  // k <= 256 uses a one-pass candidate list, larger k nth_element; both must keep exactly the
  // reference set (value desc, id asc), masks (-inf) never kept.
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 12; ++trial) {
    const int V = 5000;
    std::vector<float> l(static_cast<size_t>(V));
    for (auto& x : l) x = static_cast<float>(static_cast<int>(rng() % 200)) * 0.05f;  // many ties
    for (int i = 0; i < V; i += 11) l[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
    for (int k : {1, 5, 40, 256, 257, 1000}) {
      SamplingPolicy p = temp(1.0f);
      p.top_k = k;
      const auto d = dist_of(l, p);
      std::vector<int> idx(static_cast<size_t>(V));
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(),
                       [&](int a, int b) { return l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)]; });
      std::vector<bool> want(static_cast<size_t>(V), false);
      for (int j = 0; j < k; ++j) want[static_cast<size_t>(idx[static_cast<size_t>(j)])] = true;
      int mismatches = 0;
      for (int i = 0; i < V; ++i) mismatches += (d[static_cast<size_t>(i)] > 0.0f) != want[static_cast<size_t>(i)];
      CHECK_EQ(mismatches, 0);
    }
  }
}

TEST(compact_top_k_path_is_bitwise_the_full_path) {
  // top_k in (0, 256] runs over the k candidates only; the same row with everything outside the top k
  // masked to -inf and top_k off runs over all V tokens. Both must give bitwise the same distribution,
  // with penalties on tokens inside and outside the top k, min-p, top-p, temperature 0 and > 0.
  std::mt19937_64 rng(21);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const int V = 3000 + static_cast<int>(rng() % 3000);
    std::vector<float> l(static_cast<size_t>(V));
    for (auto& x : l) x = trial % 2 ? nd(rng) : static_cast<float>(static_cast<int>(rng() % 60)) * 0.1f;  // ties
    for (int i = 0; i < V; i += 97) l[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
    const int k = std::array<int, 5>{1, 2, 40, 255, 256}[static_cast<size_t>(trial) % 5];
    std::vector<int> idx(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int a, int b) { return l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)]; });
    std::vector<float> masked(static_cast<size_t>(V), -std::numeric_limits<float>::infinity());
    for (int j = 0; j < k; ++j)
      masked[static_cast<size_t>(idx[static_cast<size_t>(j)])] = l[static_cast<size_t>(idx[static_cast<size_t>(j)])];
    std::vector<int32_t> hist;
    for (int j = 0; j < 30; ++j) hist.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(V)));
    for (int j = 0; j < 5; ++j) hist.push_back(idx[static_cast<size_t>(j)]);  // some inside the top k for sure
    SamplingPolicy p = temp(trial % 7 == 0 ? 0.0f : 0.4f + 0.1f * static_cast<float>(trial % 9));
    p.top_k = k;
    p.top_p = trial % 3 == 0 ? 1.0f : 0.9f;
    p.min_p = trial % 4 == 0 ? 0.05f : 0.0f;
    p.repetition_penalty = trial % 5 == 4 ? 1.0f : 1.2f;
    p.presence_penalty = trial % 2 ? 0.3f : 0.0f;
    const auto compact = dist_of(l, p, hist, {idx[0]});
    SamplingPolicy full = p;
    full.top_k = 0;
    const auto ref = dist_of(masked, full, hist, {idx[0]});
    CHECK(std::memcmp(compact.data(), ref.data(), compact.size() * sizeof(float)) == 0);
  }
}

TEST(the_workspace_peak_is_the_distributions_largest_probability) {
  // ws.peak (adaptive speculation's bound on a draft's acceptance) equals the largest probability
  // sample_dist wrote, on both working sets, with every stage on or off; 1 at temperature 0 (also on the
  // greedy shortcut of sample_logits, which forms no distribution).
  std::mt19937_64 rng(8);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  SampleWorkspace ws;
  Rng r(3);
  for (int trial = 0; trial < 30; ++trial) {
    const int V = 500 + static_cast<int>(rng() % 2000);
    std::vector<float> l(static_cast<size_t>(V));
    for (auto& x : l) x = nd(rng);
    SamplingPolicy p = temp(trial % 6 == 0 ? 0.0f : 0.3f + 0.1f * static_cast<float>(trial % 10));
    p.top_k = trial % 3 == 0 ? 0 : 20 + trial;
    p.top_p = trial % 4 == 0 ? 1.0f : 0.8f;
    p.min_p = trial % 5 == 0 ? 0.1f : 0.0f;
    p.repetition_penalty = trial % 2 ? 1.3f : 1.0f;
    const std::vector<int32_t> hist = {static_cast<int32_t>(rng() % static_cast<uint64_t>(V)), 0, 1};
    std::vector<float> d(static_cast<size_t>(V));
    ws.peak = -1.0;
    sample_dist(l.data(), V, p, hist, {}, d.data(), ws);
    CHECK_NEAR(ws.peak, *std::max_element(d.begin(), d.end()), 1e-6);
    ws.peak = -1.0;
    (void)sample_logits(l.data(), V, p, hist, {}, r, ws);
    CHECK_NEAR(ws.peak, *std::max_element(d.begin(), d.end()), 1e-6);
  }
  const std::vector<float> flat4 = {0.0f, 0.0f, 0.0f, 0.0f};
  ws.peak = -1.0;
  (void)sample_logits(flat4.data(), 4, temp(1.0f), {}, {}, r, ws);
  CHECK_NEAR(ws.peak, 0.25, 1e-12);
  ws.peak = -1.0;
  (void)sample_logits(flat4.data(), 4, temp(0.0f), {}, {}, r, ws);  // the greedy shortcut
  CHECK_EQ(ws.peak, 1.0);
}

TEST(greedy_sample_logits_is_the_argmax_of_sample_dist) {
  // temperature 0 without penalties skips the distribution: the same token, the same errors.
  std::mt19937_64 rng(5);
  SampleWorkspace ws;
  Rng r(1);
  for (int trial = 0; trial < 60; ++trial) {
    const int V = 1 + static_cast<int>(rng() % 3000);
    std::vector<float> l(static_cast<size_t>(V));
    for (auto& x : l) x = static_cast<float>(static_cast<int>(rng() % 40)) * 0.25f - 5.0f;  // ties
    for (int i = 1; i < V; i += 7) l[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
    if (trial % 5 == 0) l[0] = -std::numeric_limits<float>::infinity();
    SamplingPolicy p = temp(0.0f);
    p.top_k = trial % 3 == 0 ? 0 : 1 + trial;
    std::vector<float> d(static_cast<size_t>(V));
    sample_dist(l.data(), V, p, {}, {}, d.data(), ws);
    CHECK_EQ(sample_logits(l.data(), V, p, {}, {}, r, ws), argmax(d.data(), V));
  }
  SamplingPolicy g = temp(0.0f);
  const std::vector<float> nan_row = {0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  const std::vector<float> inf_row = {0.0f, std::numeric_limits<float>::infinity()};
  const std::vector<float> dead(3, -std::numeric_limits<float>::infinity());
  CHECK_THROWS(sample_logits(nan_row.data(), 3, g, {}, {}, r, ws));
  CHECK_THROWS(sample_logits(inf_row.data(), 2, g, {}, {}, r, ws));
  CHECK_THROWS(sample_logits(dead.data(), 3, g, {}, {}, r, ws));
  CHECK_THROWS(sample_logits(dead.data(), 0, g, {}, {}, r, ws));
}

TEST(support_dist_samples_bitwise_what_the_full_distribution_samples) {
  // support_dist is what sample_logits and verify_window sample from: on its support only. Every draw,
  // exclusion, probability and argmax must be bitwise what the same call returns on sample_dist's V
  // floats, over random policies (both top-k paths, penalties, min-p, top-p, temperature 0 and > 0).
  std::mt19937_64 rng(31);
  std::normal_distribution<float> nd(0.0f, 2.5f);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  SampleWorkspace ws;
  int mismatches = 0, draws = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int V = 1 + static_cast<int>(rng() % 3000);
    std::vector<float> l(static_cast<size_t>(V));
    for (auto& x : l) x = trial % 3 ? nd(rng) : static_cast<float>(static_cast<int>(rng() % 30)) * 0.2f;  // ties
    for (int i = 0; i < V; i += 13 + trial % 7) l[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
    l[rng() % static_cast<uint64_t>(V)] = 1.0f;  // never every logit -inf
    SamplingPolicy p = temp(trial % 6 == 0 ? 0.0f : 0.3f + 0.15f * static_cast<float>(trial % 8));
    p.top_k = std::array<int, 6>{0, 1, 7, 40, 256, 300}[static_cast<size_t>(trial) % 6];
    p.top_p = trial % 4 == 0 ? 1.0f : 0.9f;
    p.min_p = trial % 5 == 0 ? 0.0f : 0.05f;
    p.repetition_penalty = trial % 3 == 1 ? 1.0f : 1.15f;
    p.presence_penalty = trial % 2 ? 0.2f : 0.0f;
    std::vector<int32_t> hist;
    for (int j = 0; j < 20; ++j) hist.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(V)));
    std::vector<float> full(static_cast<size_t>(V));
    sample_dist(l.data(), V, p, hist, {}, full.data(), ws);
    const SupportDist d = support_dist(l.data(), V, p, hist, {}, ws);
    std::vector<float> scattered(static_cast<size_t>(V), 0.0f);
    for (int j = 0; j < d.n; ++j) scattered[static_cast<size_t>(d.token(j))] = d.prob[j];
    CHECK(std::memcmp(scattered.data(), full.data(), full.size() * sizeof(float)) == 0);
    mismatches += argmax(d) != argmax(full.data(), V);
    for (int rep = 0; rep < 8; ++rep) {
      const double u = rep == 0 ? 0.0 : rep == 1 ? std::nextafter(1.0, 0.0) : unif(rng);
      const int32_t x = rep % 3 == 0 ? argmax(full.data(), V) : static_cast<int32_t>(rng() % static_cast<uint64_t>(V));
      mismatches += sample_from(d, u) != sample_from(full.data(), V, u);
      mismatches += sample_excluding(d, x, u) != sample_excluding(full.data(), V, x, u);
      mismatches += prob_of(d, x) != full[static_cast<size_t>(x)];
      draws += 3;
    }
  }
  CHECK(draws > 0);
  CHECK_EQ(mismatches, 0);
}

TEST(vocabulary_scans_are_the_scalar_rule) {
  // argmax, greedy sample_logits and the top-k scan skip 16-logit chunks that cannot matter; they must
  // pick what the plain loops pick (first largest, ties to the lowest id) and raise the same errors, also
  // where the NaN or +inf sits inside a chunk below the running maximum, and on lengths that are not a
  // multiple of 16.
  std::mt19937_64 rng(77);
  SampleWorkspace ws;
  Rng r(1);
  const float inf = std::numeric_limits<float>::infinity();
  for (int trial = 0; trial < 400; ++trial) {
    const int V = 1 + static_cast<int>(rng() % 200);
    std::vector<float> l(static_cast<size_t>(V));
    for (auto& x : l) x = static_cast<float>(static_cast<int>(rng() % 9)) - 4.0f;  // many ties
    if (trial % 4 == 0) l[rng() % static_cast<uint64_t>(V)] = -inf;
    int naive = 0;
    for (int i = 1; i < V; ++i)
      if (l[static_cast<size_t>(i)] > l[static_cast<size_t>(naive)]) naive = i;
    CHECK_EQ(argmax(l.data(), V), naive);
    CHECK_EQ(sample_logits(l.data(), V, temp(0.0f), {}, {}, r, ws), naive);
    SamplingPolicy k1 = temp(1.0f);
    k1.top_k = 1;  // the top-k scan alone decides: its one candidate is the first largest logit
    CHECK_EQ(sample_logits(l.data(), V, k1, {}, {}, r, ws), naive);
    if (V >= 2) {  // a bad logit after the maximum, where its chunk holds nothing larger
      std::vector<float> bad = l;
      bad[0] = 100.0f;
      bad[1 + rng() % static_cast<uint64_t>(V - 1)] = trial % 2 ? inf : std::numeric_limits<float>::quiet_NaN();
      CHECK_THROWS(sample_logits(bad.data(), V, temp(0.0f), {}, {}, r, ws));
      CHECK_THROWS(sample_logits(bad.data(), V, k1, {}, {}, r, ws));
    }
  }
  std::vector<float> nan0 = {std::numeric_limits<float>::quiet_NaN(), 1.0f, 2.0f};
  for (int i = 0; i < 40; ++i) nan0.push_back(static_cast<float>(i));
  CHECK_EQ(argmax(nan0.data(), static_cast<int>(nan0.size())), 0);  // nothing compares above a NaN first entry
}

TEST(speed_v151936) {
  // Measures only: sample_dist at a real vocabulary size (one row; a window runs k + 1 of them).
  const int V = 151936;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> l(static_cast<size_t>(V)), out(static_cast<size_t>(V));
  for (auto& x : l) x = n(rng);
  std::vector<int32_t> hist(2000);
  for (auto& h : hist) h = static_cast<int32_t>(rng() % V);
  SampleWorkspace ws;
  SamplingPolicy a = temp(0.7f);
  SamplingPolicy b = a;
  b.top_p = 0.95f;
  SamplingPolicy c = b;
  c.min_p = 0.05f;
  c.repetition_penalty = 1.08f;
  c.presence_penalty = 0.4f;
  SamplingPolicy d = c;
  d.top_k = 40;
  const std::pair<const char*, SamplingPolicy> cases[] = {
      {"temperature", a}, {"+ top-p 0.95", b}, {"+ min-p, penalties", c}, {"+ top-k 40", d}, {"greedy", temp(0.0f)}};
  for (const auto& [name, p] : cases) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      sample_dist(l.data(), V, p, hist, {}, out.data(), ws);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    double s = 0.0;
    for (float x : out) s += x;
    std::printf("sample_dist V=%d %-20s %.3f ms (best of 5)\n", V, name, best);
    CHECK_NEAR(s, 1.0, 1e-4);
  }
  // What a greedy decode step pays: sample_logits without penalties (the argmax of the logits).
  Rng r(3);
  double best = 1e30;
  int32_t tok = -1;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    tok = sample_logits(l.data(), V, temp(0.0f), {}, {}, r, ws);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("sample_logits V=%d greedy              %.3f ms (best of 5)\n", V, best);
  CHECK_EQ(tok, argmax(l.data(), V));
}
