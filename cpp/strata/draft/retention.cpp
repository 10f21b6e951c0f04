#include "strata/draft/retention.h"

#include <cmath>

namespace strata::draft {

bool RetentionGate::passes(int step, float p) {
  const float floor = s_.step_floor(step, min_p_);
  if (!s_.policy_on) return !(p < floor);
  if (!std::isfinite(p) || p < 0.0f || p > 1.0f) return false;  // fail closed
  if (p < floor) return false;
  cum_ *= static_cast<double>(p);
  return s_.min_cum_p <= 0.0 || cum_ >= s_.min_cum_p;
}

int retain_chained(const config::RetentionSettings& s, float caller_min_p, std::span<const float> probs) {
  RetentionGate gate(s, caller_min_p);
  gate.begin_round();
  int n = 0;
  while (n < static_cast<int>(probs.size()) && gate.passes(n, probs[static_cast<size_t>(n)])) ++n;
  return n;
}

}  // namespace strata::draft
