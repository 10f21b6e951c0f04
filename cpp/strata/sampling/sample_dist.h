#pragma once
// sample_dist (SPEC §2.8, R-12): the probability distribution one row of logits samples from under a
// policy, with the penalties looking at the history plus the window's inputs so far; and sampling
// from such a distribution with the seeded Rng. Formulas and decisions: docs/sampling.md.
#include <cstdint>
#include <span>
#include <vector>

#include "strata/sampling/policy.h"
#include "strata/sampling/rng.h"

namespace strata::sampling {

// Buffers reused across calls (no per-token allocation once warm). One per thread.
struct SampleWorkspace {
  std::vector<double> work;
  std::vector<float> exps;  // the softmax's exponentials (computed in float, vectorised)
  std::vector<int32_t> order;
  std::vector<int32_t> cand_ids;  // the top-k candidates' ids, ascending (the compact path)
  std::vector<double> topk_vals;
  std::vector<double> bucket_mass;
  std::vector<uint32_t> seen;  // per-token stamp: distinct-token bookkeeping for the penalties
  uint32_t stamp = 0;
  std::vector<int32_t> penalized;  // penalized_tokens' result
  std::vector<float> support;      // support_dist's probabilities
  int32_t greedy_token = -1;       // support_dist's one token at temperature 0
  // The largest probability of the distribution the last sample_dist / sample_logits formed (1 at
  // temperature 0): adaptive speculation's bound on a draft's acceptance (draft/adaptive.h, "Peak bound").
  double peak = 1.0;
};

// A distribution on its support, as sample_dist forms it before writing V floats: token(j) has
// probability prob[j] (j < n, ids ascending), every other token 0. ids == nullptr: every token, token(j)
// = j. Points into the workspace: valid until its next use. Sampling from it gives bitwise the token
// sampling from sample_dist's V floats gives (the zeros add nothing to any sum), without V-sized passes
// when top-k (<= 256) or temperature 0 left few candidates.
struct SupportDist {
  int n = 0;
  const int32_t* ids = nullptr;
  const float* prob = nullptr;
  int32_t token(int j) const { return ids ? ids[j] : j; }
};

// sample_dist's distribution on its support (same stages, same errors, same ws.peak).
SupportDist support_dist(const float* logits, int V, const SamplingPolicy& policy, std::span<const int32_t> history,
                         std::span<const int32_t> inputs, SampleWorkspace& ws);

// Writes V probabilities to out[0..V) (zero outside the support; they sum to 1 up to float rounding).
// history: committed tokens before the window's inputs; inputs: the window's tokens after them
// (for row i of a verification window: drafts[0..i)). Penalties see the last penalty_last_n tokens of
// history ++ inputs. temperature 0 gives a one-hot at the argmax (ties to the lowest id).
// Throws Value on V < 1, a token id outside [0, V), NaN / +inf logits, or all logits -inf.
void sample_dist(const float* logits, int V, const SamplingPolicy& policy, std::span<const int32_t> history,
                 std::span<const int32_t> inputs, float* out, SampleWorkspace& ws);

// Whether the repetition / presence penalties change anything (and look at the history).
bool penalties_apply(const SamplingPolicy& p);
// The distinct tokens the penalties see: the last penalty_last_n of history ++ inputs, each once, in the
// order first seen from the oldest (empty when the penalties do not apply). The span lives in ws until
// its next use. Throws Value on a token outside [0, V).
std::span<const int32_t> penalized_tokens(int V, const SamplingPolicy& p, std::span<const int32_t> history,
                                          std::span<const int32_t> inputs, SampleWorkspace& ws);
// A penalised token's logit: positive logits / repetition_penalty, negative · repetition_penalty, then
// minus presence_penalty.
inline double penalized_logit(double x, const SamplingPolicy& p) {
  return (x > 0.0 ? x / p.repetition_penalty : x * p.repetition_penalty) - p.presence_penalty;
}

// Index of the largest probability (ties to the lowest id).
int32_t argmax(const float* dist, int V);
// Draws from dist with one uniform u: the first token whose cumulative mass exceeds u · total.
int32_t sample_from(const float* dist, int V, double u);
// Draws from dist with token `x` removed and the rest renormalised (norm(max(p − onehot(x), 0))).
// If nothing else has mass, returns x.
int32_t sample_excluding(const float* dist, int V, int32_t x, double u);

// The same three on a SupportDist (bitwise what they return on its V floats).
int32_t argmax(const SupportDist& d);
int32_t sample_from(const SupportDist& d, double u);
int32_t sample_excluding(const SupportDist& d, int32_t x, double u);
// Token x's probability in d (0 outside the support).
float prob_of(const SupportDist& d, int32_t x);

// sample_dist then one draw (temperature 0: the argmax, drawing nothing from rng).
int32_t sample_logits(const float* logits, int V, const SamplingPolicy& policy, std::span<const int32_t> history,
                      std::span<const int32_t> inputs, Rng& rng, SampleWorkspace& ws);

}  // namespace strata::sampling
