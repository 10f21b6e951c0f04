#pragma once
// Sigmoid expert scoring with a selection bias (glm4moe, DeepSeek-V3 style; docs/gguf.md §4) on top
// of the cache-aware top-K of router.h:
//   s_e   = σ(logit_e)                       the expert's score
//   sel_e = s_e + bias_e                     used only to choose the experts
//   ids   = top-K of sel (MOCE: the resident bonus multiplies the selection scores, see below)
//   w_i   = s_{id_i} / (Σ_sel s + 1e-20) if norm, else s_{id_i};  then w_i *= scale
// MOCE on selection scores: the bonus is a multiplier, which only favours an expert when its score
// is >= 0, and sel may be negative (a negative bias). With a residency map and a bonus on, the scores
// are shifted by -min(0, min_e sel_e) first, a per-row constant that keeps their order; otherwise
// (plain top-K) they are ranked as they are, exactly as transformers' Glm4MoeTopkRouter ranks them.
#include <cstdint>

#include "strata/routing/router.h"

namespace strata::routing {

struct SigmoidRouting {
  const float* bias = nullptr;  // [E] selection bias (nullptr = none)
  bool norm = true;             // renormalise the selected scores
  float scale = 1.0f;           // routed scaling factor
};

// logits: the E router logits of one row, overwritten with s = σ(logits) (what a route trace
// records). sel: E floats of caller scratch (the selection scores). Picks k ids and their weights
// as above; no allocation. Throws Value on a NaN score or k out of range (route_row's rules).
void sigmoid_route_row(float* logits, float* sel, int n_experts, int k, const SigmoidRouting& sr,
                       const uint8_t* resident, const MoceParams& p, bool draft_row, int32_t* ids, float* weights);

}  // namespace strata::routing
