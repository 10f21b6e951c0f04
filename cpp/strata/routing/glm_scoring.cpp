#include "strata/routing/glm_scoring.h"

#include <cmath>

#include "strata/routing/biased_scoring.h"

namespace strata::routing {

void sigmoid_route_row(float* logits, float* sel, int n_experts, int k, const SigmoidRouting& sr,
                       const uint8_t* resident, const MoceParams& p, bool draft_row, int32_t* ids, float* weights) {
  detail::biased_route_row([](float x) { return 1.0f / (1.0f + std::exp(-x)); }, logits, sel, n_experts, k, sr, nullptr,
                           resident, p, draft_row, ids, weights);
}

}  // namespace strata::routing
