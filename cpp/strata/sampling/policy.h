#pragma once
// The sampling policy of one generation (SPEC §2.8): what sample_dist applies, in this order:
// top-k, repetition + presence penalties, temperature, min-p, top-p. Formulas: docs/sampling.md.
#include <cstdint>

namespace strata::sampling {

struct SamplingPolicy {
  float temperature = 0.0f;         // 0 = greedy (argmax after top-k and penalties)
  int top_k = 0;                    // 0 = off; keeps the k largest logits (ties to the lowest id)
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float min_p = 0.0f;               // [0, 1]; 0 = off; drops p < min_p · p_max
  float repetition_penalty = 1.0f;  // > 0; 1 = off; positive logits / rp, negative logits · rp
  float presence_penalty = 0.0f;    // subtracted once from each distinct token seen
  int penalty_last_n = -1;          // tokens the penalties look back over: -1 all, 0 none, n > 0 the last n
};

// How a window with temperature > 0 is verified. Exact: speculative sampling (Leviathan et al. 2023).
// Greedy: the legacy greedy-match rule (keep drafts equal to each row's argmax, sample the next token
// at the stop row). With temperature 0 both are greedy verification.
enum class SpecSample { Exact, Greedy };

// Throws strata::Error(Value) naming the first invalid field.
void validate(const SamplingPolicy& p);

}  // namespace strata::sampling
