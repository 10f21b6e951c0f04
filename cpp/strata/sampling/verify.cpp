#include "strata/sampling/verify.h"

#include <string>

#include "strata/util/error.h"

namespace strata::sampling {

VerifyResult verify_window(const float* logits, int V, std::span<const int32_t> drafts, const SamplingPolicy& policy,
                           SpecSample mode, std::span<const int32_t> history, Rng& rng, SampleWorkspace& ws) {
  if (V < 1) throw_error(ErrorKind::Value, "verify_window: vocabulary size must be >= 1");
  for (size_t i = 0; i < drafts.size(); ++i)
    if (drafts[i] < 0 || drafts[i] >= V)
      throw_error(ErrorKind::Value, "verify_window: draft " + std::to_string(i) + " = " + std::to_string(drafts[i]) +
                                        " is outside [0, " + std::to_string(V) + ")");
  const int k = static_cast<int>(drafts.size());
  VerifyResult r;
  if (policy.temperature == 0.0f) {
    // Each row's token exactly as a plain step picks it (sample_logits: without penalties the argmax
    // of the logits themselves, no V-sized pass in double; a window row cost ~35 us more here than a
    // plain step's choice on the demo model).
    for (int i = 0; i <= k; ++i) {
      const float* row = logits + static_cast<size_t>(i) * static_cast<size_t>(V);
      const int32_t best = sample_logits(row, V, policy, history, drafts.first(static_cast<size_t>(i)), rng, ws);
      if (i == k || drafts[static_cast<size_t>(i)] != best) {
        r.accepted = i;
        r.next_token = best;
        return r;
      }
    }
    return r;  // unreachable: row k always returns
  }
  // Each row's distribution on its support (top-k's candidates): no V-sized pass per row.
  const bool greedy_rows = mode == SpecSample::Greedy;
  for (int i = 0; i <= k; ++i) {
    const float* row = logits + static_cast<size_t>(i) * static_cast<size_t>(V);
    const SupportDist p = support_dist(row, V, policy, history, drafts.first(static_cast<size_t>(i)), ws);
    if (i == k) {  // every draft kept: the next token comes from the last row
      r.accepted = k;
      r.next_token = sample_from(p, rng.uniform());
      return r;
    }
    const int32_t x = drafts[static_cast<size_t>(i)];
    if (greedy_rows) {
      const int32_t best = argmax(p);
      if (x == best) continue;
      r.accepted = i;
      r.next_token = sample_from(p, rng.uniform());
      return r;
    }
    if (rng.uniform() < static_cast<double>(prob_of(p, x))) continue;  // accepted with probability p_i(x)
    r.accepted = i;
    r.next_token = sample_excluding(p, x, rng.uniform());
    return r;
  }
  return r;  // unreachable: the loop returns at i == k
}

}  // namespace strata::sampling
