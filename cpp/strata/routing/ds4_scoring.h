#pragma once
// deepseek4's expert scoring (docs/models.md, deepseek4), on top of the cache-aware top-K of router.h:
//   s_e = sqrt(softplus(logit_e))             the expert's score
//   routed layers: ids = top-K of s + bias     (the selection bias, exp_probs_b; MOCE as in
//                                               glm_scoring.h: scores shifted to >= 0 when a bonus applies)
//   hash layers:   ids = tid2eid[token]        (a fixed table; MOCE does not apply)
//   w_i = s_{id_i} / (Σ_sel s + 1e-20) if norm, else s_{id_i}; then w_i *= scale
#include <cstdint>

#include "strata/routing/glm_scoring.h"
#include "strata/routing/router.h"

namespace strata::routing {

// logits: the E router logits of one row, overwritten with s (what a route trace records). sel: E
// floats of caller scratch. hashed: nullptr (routed layer) or the row's k expert ids. No allocation.
void sqrt_softplus_route_row(float* logits, float* sel, int n_experts, int k, const SigmoidRouting& sr,
                             const int32_t* hashed, const uint8_t* resident, const MoceParams& p, bool draft_row,
                             int32_t* ids, float* weights);

}  // namespace strata::routing
