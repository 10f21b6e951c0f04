#pragma once
// Expert selection of one row from its softmax probabilities: top-K by probability, ties to the
// lower id, weights = p / max(Σ_selected p, 2^-14) (docs/gguf.md §2 "MoE"). This is the plain
// (non cache-aware) selection; routing/router.h's route_row with default MoceParams computes the
// same and replaces it once the router lands.
#include <cstdint>

namespace strata::engine {

void select_experts(const float* probs, int n_experts, int k, int32_t* ids, float* weights);

}  // namespace strata::engine
