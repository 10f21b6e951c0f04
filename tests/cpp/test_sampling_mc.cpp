// Monte-Carlo check of exact speculative sampling (SPEC §2.8, R-12). A toy model over 6 tokens with
// history-dependent logits, sampled under temp 0.6, top-p 0.95, min-p 0.05, repetition 1.08,
// presence 0.4; 3-token continuations. Four runs of N sequences each: one-at-a-time (twice,
// independent seeds: the noise floor), exact speculative sampling with a deterministic toy drafter
// (k = 1, 2, 3 drafts per window in turn), and the legacy greedy-match rule. Reports the total
// variation distance of each to one-at-a-time run A and to the exact enumerated distribution, and a
// chi-square of the speculative run against the exact distribution.
#define STRATA_TEST_MAIN
#include "check.h"

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "strata/sampling/sample_dist.h"
#include "strata/sampling/verify.h"

using namespace strata::sampling;

namespace {

constexpr int V = 6;
constexpr int kSeqLen = 3;
constexpr int kCells = V * V * V;
constexpr long kSequences = 400000;

struct Toy {
  float last[V][V];    // logit contribution of the last token
  float second[V][V];  // ... of the token before it
  float parity[2][V];  // ... of the context length's parity
  float drafter_noise[V][V];

  Toy() {
    std::mt19937_64 g(1234);
    std::uniform_real_distribution<float> u(-1.5f, 1.5f);
    for (auto& row : last)
      for (auto& x : row) x = u(g);
    for (auto& row : second)
      for (auto& x : row) x = 0.7f * u(g);
    for (auto& row : parity)
      for (auto& x : row) x = 0.3f * u(g);
    for (auto& row : drafter_noise)
      for (auto& x : row) x = 0.5f * u(g);
  }
  void logits(const int32_t* ctx, int n, float* out) const {
    for (int t = 0; t < V; ++t)
      out[t] = last[ctx[n - 1]][t] + (n >= 2 ? second[ctx[n - 2]][t] : 0.0f) + parity[n & 1][t];
  }
  // Deterministic drafter: the argmax of the model's logits plus a fixed perturbation.
  int32_t draft(const int32_t* ctx, int n) const {
    float l[V];
    logits(ctx, n, l);
    int32_t best = 0;
    for (int t = 0; t < V; ++t) {
      l[t] += drafter_noise[ctx[n - 1]][t];
      if (l[t] > l[best]) best = t;
    }
    return best;
  }
};

// penalty_last_n = -1: the penalties see the whole sequence; 2: only its last two tokens (a window
// shorter than prompt + continuation, so tokens leave it as a window of drafts is verified).
SamplingPolicy policy(int32_t penalty_last_n = -1) {
  SamplingPolicy p;
  p.penalty_last_n = penalty_last_n;
  p.temperature = 0.6f;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.08f;
  p.presence_penalty = 0.4f;
  return p;
}

const std::array<int32_t, 3> kPrompt = {2, 5, 1};

int cell(const int32_t* gen) { return (gen[0] * V + gen[1]) * V + gen[2]; }

std::vector<long> run_one_at_a_time(const Toy& toy, uint64_t seed, const SamplingPolicy& p = policy()) {
  std::vector<long> hist(kCells, 0);
  Rng rng(seed);
  SampleWorkspace ws;
  int32_t ctx[16];
  float l[V];
  for (long s = 0; s < kSequences; ++s) {
    int n = 0;
    for (int32_t t : kPrompt) ctx[n++] = t;
    for (int j = 0; j < kSeqLen; ++j) {
      toy.logits(ctx, n, l);
      ctx[n] = sample_logits(l, V, p, std::span<const int32_t>(ctx, static_cast<size_t>(n)), {}, rng, ws);
      ++n;
    }
    ++hist[static_cast<size_t>(cell(ctx + kPrompt.size()))];
  }
  return hist;
}

std::vector<long> run_speculative(const Toy& toy, uint64_t seed, SpecSample mode, double* mean_accepted,
                                  const SamplingPolicy& p = policy()) {
  std::vector<long> hist(kCells, 0);
  Rng rng(seed);
  SampleWorkspace ws;
  int32_t ctx[32];
  std::vector<float> rows(4 * V);
  long windows = 0, accepted = 0;
  for (long s = 0; s < kSequences; ++s) {
    int n = 0;
    for (int32_t t : kPrompt) ctx[n++] = t;
    const int committed0 = n;
    while (n - committed0 < kSeqLen) {
      const int k = 1 + static_cast<int>((s + windows) % 3);
      // Draft a chain of k tokens, then run the window's k + 1 rows of the "main model".
      int32_t buf[32];
      for (int i = 0; i < n; ++i) buf[i] = ctx[i];
      for (int i = 0; i < k; ++i) buf[n + i] = toy.draft(buf, n + i);
      for (int i = 0; i <= k; ++i) toy.logits(buf, n + i, rows.data() + i * V);
      const auto r = verify_window(rows.data(), V, std::span<const int32_t>(buf + n, static_cast<size_t>(k)), p, mode,
                                   std::span<const int32_t>(ctx, static_cast<size_t>(n)), rng, ws);
      for (int i = 0; i < r.accepted; ++i, ++n) ctx[n] = buf[n];
      ctx[n++] = r.next_token;
      ++windows;
      accepted += r.accepted;
    }
    ++hist[static_cast<size_t>(cell(ctx + kPrompt.size()))];
  }
  *mean_accepted = static_cast<double>(accepted) / static_cast<double>(windows);
  return hist;
}

// The exact distribution of the 3 generated tokens, by the chain rule over sample_dist.
std::vector<double> exact_distribution(const Toy& toy, const SamplingPolicy& p = policy()) {
  std::vector<double> out(kCells, 0.0);
  SampleWorkspace ws;
  float l[V], d0[V], d1[V], d2[V];
  int32_t ctx[6] = {kPrompt[0], kPrompt[1], kPrompt[2], 0, 0, 0};
  toy.logits(ctx, 3, l);
  sample_dist(l, V, p, std::span<const int32_t>(ctx, 3), {}, d0, ws);
  for (int a = 0; a < V; ++a) {
    ctx[3] = a;
    toy.logits(ctx, 4, l);
    sample_dist(l, V, p, std::span<const int32_t>(ctx, 4), {}, d1, ws);
    for (int b = 0; b < V; ++b) {
      ctx[4] = b;
      toy.logits(ctx, 5, l);
      sample_dist(l, V, p, std::span<const int32_t>(ctx, 5), {}, d2, ws);
      for (int c = 0; c < V; ++c)
        out[static_cast<size_t>((a * V + b) * V + c)] =
            static_cast<double>(d0[a]) * static_cast<double>(d1[b]) * static_cast<double>(d2[c]);
    }
  }
  return out;
}

double tv(const std::vector<long>& a, const std::vector<long>& b) {
  double s = 0.0;
  for (int i = 0; i < kCells; ++i)
    s += std::fabs(static_cast<double>(a[static_cast<size_t>(i)] - b[static_cast<size_t>(i)])) / kSequences;
  return 0.5 * s;
}
double tv_exact(const std::vector<long>& a, const std::vector<double>& p) {
  double s = 0.0;
  for (int i = 0; i < kCells; ++i)
    s += std::fabs(static_cast<double>(a[static_cast<size_t>(i)]) / kSequences - p[static_cast<size_t>(i)]);
  return 0.5 * s;
}
// Pearson chi-square over the support, and the number of samples that fell outside it.
double chi_square(const std::vector<long>& a, const std::vector<double>& p, int* df, long* outside) {
  double x2 = 0.0;
  *df = -1;
  *outside = 0;
  for (int i = 0; i < kCells; ++i) {
    const double e = p[static_cast<size_t>(i)] * kSequences;
    if (p[static_cast<size_t>(i)] == 0.0) {
      *outside += a[static_cast<size_t>(i)];
      continue;
    }
    ++*df;
    const double d = static_cast<double>(a[static_cast<size_t>(i)]) - e;
    x2 += d * d / e;
  }
  return x2;
}

}  // namespace

TEST(speculative_sampling_matches_one_at_a_time) {
  const auto t0 = std::chrono::steady_clock::now();
  const Toy toy;
  const auto exact = exact_distribution(toy);
  double total = 0.0;
  int support = 0;
  for (double x : exact) {
    total += x;
    support += x > 0.0;
  }
  CHECK_NEAR(total, 1.0, 1e-5);

  const auto a = run_one_at_a_time(toy, 101);
  const auto b = run_one_at_a_time(toy, 202);
  double acc_exact = 0.0, acc_greedy = 0.0;
  const auto spec = run_speculative(toy, 303, SpecSample::Exact, &acc_exact);
  const auto greedy = run_speculative(toy, 404, SpecSample::Greedy, &acc_greedy);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const double floor_ab = tv(a, b), spec_a = tv(spec, a), greedy_a = tv(greedy, a);
  int df_spec = 0, df_a = 0, df_greedy = 0;
  long out_spec = 0, out_a = 0, out_greedy = 0;
  const double x2_spec = chi_square(spec, exact, &df_spec, &out_spec);
  const double x2_a = chi_square(a, exact, &df_a, &out_a);
  const double x2_greedy = chi_square(greedy, exact, &df_greedy, &out_greedy);
  std::printf("MC: %ld sequences of %d tokens per run, %d of %d sequences in the support, %.1f s for all runs\n",
              kSequences, kSeqLen, support, kCells, secs);
  std::printf("  TV(one-at-a-time A, B)      = %.5f  (noise floor)\n", floor_ab);
  std::printf("  TV(exact speculative, A)    = %.5f  (mean accepted drafts %.3f per window)\n", spec_a, acc_exact);
  std::printf("  TV(greedy-match, A)         = %.5f  (mean accepted drafts %.3f per window)\n", greedy_a, acc_greedy);
  std::printf("  TV to the exact distribution: A %.5f, B %.5f, speculative %.5f, greedy-match %.5f\n",
              tv_exact(a, exact), tv_exact(b, exact), tv_exact(spec, exact), tv_exact(greedy, exact));
  std::printf(
      "  chi-square vs exact (df %d, 99.9%% critical ~ %.0f): one-at-a-time %.1f, speculative %.1f, "
      "greedy-match %.1f; samples outside the support: %ld, %ld, %ld\n",
      df_spec, df_spec + 4.4 * std::sqrt(2.0 * df_spec), x2_a, x2_spec, x2_greedy, out_a, out_spec, out_greedy);

  CHECK_EQ(out_spec, 0L);
  CHECK_EQ(out_a, 0L);
  CHECK(spec_a < 1.3 * floor_ab);
  CHECK(greedy_a > 4.0 * floor_ab);
  CHECK(x2_spec < df_spec + 4.4 * std::sqrt(2.0 * df_spec));  // ~ p = 0.001 for df ~ 100
  CHECK(x2_greedy > 10.0 * (df_greedy + 4.4 * std::sqrt(2.0 * df_greedy)));
  CHECK(acc_exact > 0.3);  // the drafter is right often enough to exercise acceptance ...
  CHECK(acc_exact < 1.8);  // ... and wrong often enough to exercise rejection
}

TEST(speculative_sampling_is_exact_with_a_penalty_window) {
  // The command line's recommended policy penalises only a recent window (penalty_last_n = 64); the
  // verifier must apply the same window to row i (history ++ drafts[0..i)) as one-at-a-time sampling.
  const Toy toy;
  const SamplingPolicy p = policy(2);
  const auto exact = exact_distribution(toy, p);
  const auto full = exact_distribution(toy);
  double moved = 0.0;
  for (int i = 0; i < kCells; ++i) moved += std::fabs(exact[static_cast<size_t>(i)] - full[static_cast<size_t>(i)]);
  CHECK(0.5 * moved > 0.01);  // the window changes the distribution: this case tests something
  double acc = 0.0;
  const auto a = run_one_at_a_time(toy, 505, p);
  const auto spec = run_speculative(toy, 606, SpecSample::Exact, &acc, p);
  int df = 0, df_a = 0;
  long outside = 0, outside_a = 0;
  const double x2 = chi_square(spec, exact, &df, &outside);
  const double x2_a = chi_square(a, exact, &df_a, &outside_a);
  std::printf(
      "MC, penalty window 2: TV(exact speculative, exact) = %.5f, one-at-a-time %.5f; chi-square %.1f / "
      "%.1f (df %d); TV(window 2, whole sequence) = %.4f\n",
      tv_exact(spec, exact), tv_exact(a, exact), x2, x2_a, df, 0.5 * moved);
  CHECK_EQ(outside, 0L);
  CHECK_EQ(outside_a, 0L);
  CHECK(x2 < df + 4.4 * std::sqrt(2.0 * df));
  CHECK(x2_a < df_a + 4.4 * std::sqrt(2.0 * df_a));
}
