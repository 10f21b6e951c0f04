#pragma once
// Cache-aware top-K expert routing (MOCE, SPEC §2.4, R-1) for one row of router probabilities.
// The rules, the decisions where the spec is ambiguous, and the test grid: docs/routing.md.
#include <cstdint>

namespace strata::routing {

// Largest K route_row supports (its scratch lives on the stack).
inline constexpr int kMaxTopK = 64;

struct MoceParams {
  float resident_bonus = 1.0f;  // m = e^λ, applied to resident scores when > 1
  float rank1_scale = 1.0f;     // r: the rank-1 branch runs only when r > 1 and protect > 1
  int protect = 0;              // r_prot: first rank that carries the bonus (max(1, r_prot)); < 0 acts as 0
  bool draft = false;           // draft flag: draft rows use m = fl32(b·b) and r_prot = 1
  // Streaming-aware verification windows (window_routing.h): > 1 routes the draft rows of a verification
  // window with the draft-row rule, b = window_bonus, against the residency plus the window's requests.
  float window_bonus = 1.0f;
};

// The multiplier a still-unpicked resident expert's score carries while rank `rank` (0-based) is being
// picked. Nonresident experts (and every expert when there is no residency map) always carry 1.
float resident_multiplier(const MoceParams& p, bool draft_row, int rank);

// probs: the E softmax probabilities of one row (finite, >= 0). resident: nullptr (no residency map)
// or E bytes, nonzero = resident. draft_row: this row is a draft row of a verification window (rows
// after the first); it changes anything only if p.draft.
// Picks k expert ids one rank at a time (highest scaled score, compared exactly; ties to the lowest
// id) into ids[0..k) and their weights into weights[0..k): the original probabilities renormalised
// over the selected set, sum floored at 2^-14. No allocation. Throws Value if k is not in
// [1, min(n_experts, kMaxTopK)].
void route_row(const float* probs, int n_experts, int k, const uint8_t* resident, const MoceParams& p, bool draft_row,
               int32_t* ids, float* weights);

// The drafter's resident-only rule (STRATA_MOCE_DRAFTER_RESIDENT): when the map holds at least k resident
// experts, the other experts' probabilities become 0, so plain top-k (route_row without a map) picks among
// the resident ones and renormalises over them. Returns whether it did (false: no map, or fewer than k).
bool keep_resident_only(float* probs, int n_experts, int k, const uint8_t* resident);

}  // namespace strata::routing
