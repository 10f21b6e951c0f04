// MOCE routing. Within one rank every remaining resident expert carries the same multiplier and every
// nonresident carries 1, and a product of two floats is exact in double, so the per-class order by
// (probability desc, id asc) never changes: each class keeps a sorted top-k list (one pass over E) and
// the k ranks merge the two list heads under that rank's multiplier.
#include "strata/routing/router.h"

#include <cmath>
#include <limits>
#include <string>

#include "strata/util/error.h"

namespace strata::routing {
namespace {

constexpr double kWeightFloor = 1.0 / 16384.0;  // 2^-14

// A bounded list of the best `cap` (prob desc, id asc) candidates seen so far, sorted best first.
// `floor` is the value a newcomer must beat: -inf until the list is full, then its last value.
struct TopList {
  int32_t ids[kMaxTopK];
  float vals[kMaxTopK];
  int size = 0;
  float floor = -std::numeric_limits<float>::infinity();

  // Experts arrive in increasing id, so an equal probability never displaces an earlier (lower) id.
  inline void insert(float v, int32_t id, int cap) {
    int pos = size == cap ? cap - 1 : size++;
    while (pos > 0 && v > vals[pos - 1]) {
      vals[pos] = vals[pos - 1];
      ids[pos] = ids[pos - 1];
      --pos;
    }
    vals[pos] = v;
    ids[pos] = id;
    if (size == cap) floor = vals[cap - 1];
  }
};

}  // namespace

bool keep_resident_only(float* probs, int n_experts, int k, const uint8_t* resident) {
  if (resident == nullptr) return false;
  int have = 0;
  for (int e = 0; e < n_experts && have < k; ++e) have += resident[e] != 0;
  if (have < k) return false;
  for (int e = 0; e < n_experts; ++e)
    if (resident[e] == 0) probs[e] = 0.0f;
  return true;
}

float resident_multiplier(const MoceParams& p, bool draft_row, int rank) {
  const bool as_draft = draft_row && p.draft;
  const float m = as_draft ? p.resident_bonus * p.resident_bonus : p.resident_bonus;
  const int prot = as_draft ? 1 : (p.protect < 0 ? 0 : p.protect);
  if (rank <= 0) return 1.0f;
  const bool rank1_branch = p.rank1_scale > 1.0f && prot > 1;
  if (rank1_branch) {
    if (rank < prot) return p.rank1_scale;
    return m > 1.0f ? m : p.rank1_scale;
  }
  const int bonus_from = prot > 1 ? prot : 1;
  return (rank >= bonus_from && m > 1.0f) ? m : 1.0f;
}

void route_row(const float* probs, int n_experts, int k, const uint8_t* resident, const MoceParams& p, bool draft_row,
               int32_t* ids, float* weights) {
  if (k < 1 || k > n_experts || k > kMaxTopK)
    throw_error(ErrorKind::Value, "route_row: k = " + std::to_string(k) + " must be in [1, min(n_experts = " +
                                      std::to_string(n_experts) + ", " + std::to_string(kMaxTopK) + ")]");

  TopList res, non;
  // A non-finite probability means the router's logits were broken (NaN weights, overflow); routing
  // around it would hide that, so the row is refused. Checked in the selection loop: no extra pass.
  bool finite = true;
  if (resident == nullptr) {
    for (int e = 0; e < n_experts; ++e) {
      finite &= std::fabs(probs[e]) <= std::numeric_limits<float>::max();
      if (probs[e] > non.floor) non.insert(probs[e], e, k);
    }
  } else {
    TopList* lists[2] = {&non, &res};  // indexed, not branched: residency is unpredictable per expert
    for (int e = 0; e < n_experts; ++e) {
      finite &= std::fabs(probs[e]) <= std::numeric_limits<float>::max();
      TopList* l = lists[resident[e] != 0];
      if (probs[e] > l->floor) l->insert(probs[e], e, k);
    }
  }
  if (!finite) {
    int bad = 0;
    while (std::fabs(probs[bad]) <= std::numeric_limits<float>::max()) ++bad;
    throw_error(ErrorKind::Value, "route_row: the probability of expert " + std::to_string(bad) + " is " +
                                      std::to_string(probs[bad]) +
                                      " (the router produced a non-finite value; refusing to route the row)");
  }

  int ri = 0, ni = 0;
  double sum = 0.0;
  for (int rank = 0; rank < k; ++rank) {
    bool take_res;
    if (ri == res.size) {
      take_res = false;
    } else if (ni == non.size) {
      take_res = true;
    } else {
      const double mult = static_cast<double>(resident_multiplier(p, draft_row, rank));
      const double sr = static_cast<double>(res.vals[ri]) * mult;  // exact: float × float in double
      const double sn = static_cast<double>(non.vals[ni]);
      take_res = sr > sn || (sr == sn && res.ids[ri] < non.ids[ni]);
    }
    // The weight uses the original probability: the score divided by the multiplier it carried.
    const float v = take_res ? res.vals[ri] : non.vals[ni];
    ids[rank] = take_res ? res.ids[ri++] : non.ids[ni++];
    weights[rank] = v;
    sum += static_cast<double>(v);
  }
  const double denom = sum > kWeightFloor ? sum : kWeightFloor;
  for (int i = 0; i < k; ++i) weights[i] = static_cast<float>(static_cast<double>(weights[i]) / denom);
}

}  // namespace strata::routing
