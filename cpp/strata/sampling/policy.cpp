#include "strata/sampling/policy.h"

#include <cmath>
#include <string>

#include "strata/util/error.h"

namespace strata::sampling {

void validate(const SamplingPolicy& p) {
  auto bad = [](const std::string& what) { throw_error(ErrorKind::Value, "sampling policy: " + what); };
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f)
    bad("temperature must be finite and >= 0, got " + std::to_string(p.temperature));
  if (p.top_k < 0) bad("top_k must be >= 0 (0 = off), got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) bad("top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) bad("min_p must be in [0, 1], got " + std::to_string(p.min_p));
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f)
    bad("repetition_penalty must be finite and > 0, got " + std::to_string(p.repetition_penalty));
  if (!std::isfinite(p.presence_penalty))
    bad("presence_penalty must be finite, got " + std::to_string(p.presence_penalty));
  if (p.penalty_last_n < -1)
    bad("penalty_last_n must be -1 (all), 0 (none) or > 0, got " + std::to_string(p.penalty_last_n));
}

}  // namespace strata::sampling
