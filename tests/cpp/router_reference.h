#pragma once
// The independent MOCE routing reference and the grid's probability rows (SPEC §2.4, R-1), shared by
// tests/cpp/test_router.cpp (route_row) and tests/cpp/test_metal_router.cpp (the Metal kernel).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace router_reference {

struct Routed {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};

// The reference, written straight from the SPEC text and structured unlike router.cpp: every resident
// expert carries its own multiplier, updated by the spec's transitions as the ranks advance; at every
// rank every remaining expert's score is recomputed in double and the whole row is scanned.
inline Routed reference_route(const std::vector<float>& probs, int k, const std::vector<uint8_t>* resident, double b,
                              double r, int r_prot, bool draft_flag, bool draft_row) {
  const int E = static_cast<int>(probs.size());
  // Draft rows (draft flag on, not the first row): double log-bonus m = b² (rounded to float, as the
  // documented rule says) and r_prot = 1. The first row keeps the configured values.
  double m = b;
  int prot = r_prot < 0 ? 0 : r_prot;
  if (draft_flag && draft_row) {
    m = static_cast<double>(static_cast<float>(b * b));
    prot = 1;
  }
  const bool rank1_branch = r > 1.0 && prot > 1;
  const int bonus_rank = std::max(1, prot);

  std::vector<double> carried(static_cast<size_t>(E), 1.0);  // multiplier each expert carries now
  std::vector<bool> taken(static_cast<size_t>(E), false);
  Routed out;
  std::vector<double> picked_score, picked_mult;
  for (int rank = 0; rank < k; ++rank) {
    for (int e = 0; e < E; ++e) {
      const bool is_res = resident != nullptr && (*resident)[static_cast<size_t>(e)] != 0;
      if (!is_res) {
        carried[static_cast<size_t>(e)] = 1.0;  // nonresident: never scaled
        continue;
      }
      double mult = 1.0;                            // rank 0: unscaled
      if (rank1_branch && rank >= 1) mult = r;      // from rank 1 residents carry r
      if (rank >= bonus_rank && m > 1.0) mult = m;  // the bonus, once (r → m: "× m/r")
      // r_prot ≥ K: rank never reaches bonus_rank, the tail keeps r; m ≤ 1: the tail keeps r.
      carried[static_cast<size_t>(e)] = mult;
    }
    int best = -1;
    double best_score = 0.0;
    for (int e = 0; e < E; ++e) {
      if (taken[static_cast<size_t>(e)]) continue;
      const double s = static_cast<double>(probs[static_cast<size_t>(e)]) * carried[static_cast<size_t>(e)];
      if (best < 0 || s > best_score) {  // strict: ties keep the lower id
        best = e;
        best_score = s;
      }
    }
    taken[static_cast<size_t>(best)] = true;
    out.ids.push_back(best);
    picked_score.push_back(best_score);
    picked_mult.push_back(carried[static_cast<size_t>(best)]);
  }
  // Weights: each picked score divided by the multiplier it carried when picked, renormalised.
  double sum = 0.0;
  for (size_t i = 0; i < picked_score.size(); ++i) sum += picked_score[i] / picked_mult[i];
  const double denom = std::max(sum, std::ldexp(1.0, -14));
  for (size_t i = 0; i < picked_score.size(); ++i) out.weights.push_back(picked_score[i] / picked_mult[i] / denom);
  return out;
}

// Plain top-K by probability (ties to the lowest id) via a full sort, weights renormalised.
inline Routed plain_topk(const std::vector<float>& probs, int k) {
  std::vector<int32_t> order(probs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t c) { return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(c)]; });
  Routed out;
  double sum = 0.0;
  for (int i = 0; i < k; ++i) {
    out.ids.push_back(order[static_cast<size_t>(i)]);
    sum += probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
  }
  const double denom = std::max(sum, std::ldexp(1.0, -14));
  for (int i = 0; i < k; ++i)
    out.weights.push_back(probs[static_cast<size_t>(out.ids[static_cast<size_t>(i)])] / denom);
  return out;
}

// Trial t's probabilities: softmax of Gaussian logits at a trial-dependent temperature; every third
// trial quantises to multiples of 1/64 or 1/256 (many exact ties, also after ×2 and ×4), one trial has
// exact zeros, one is nearly uniform.
inline std::vector<float> trial_probs(int trial, int E, std::mt19937_64& rng) {
  std::normal_distribution<double> g(0.0, 1.0);
  const double temps[12] = {1.0, 0.3, 2.0, 0.5, 1.5, 0.1, 4.0, 0.7, 1.0, 0.05, 3.0, 1.2};
  std::vector<double> logits(static_cast<size_t>(E));
  double mx = -1e300;
  for (auto& x : logits) {
    x = g(rng) / temps[trial];
    mx = std::max(mx, x);
  }
  double s = 0.0;
  for (auto& x : logits) s += (x = std::exp(x - mx));
  std::vector<float> p(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) p[static_cast<size_t>(e)] = static_cast<float>(logits[static_cast<size_t>(e)] / s);
  if (trial % 3 == 2) {
    const double q = trial % 2 ? 64.0 : 256.0;
    for (auto& x : p) x = static_cast<float>(std::round(static_cast<double>(x) * q * (E / 32.0)) / (q * (E / 32.0)));
  }
  if (trial == 4)
    for (int e = 0; e < E; e += 3) p[static_cast<size_t>(e)] = 0.0f;
  if (trial == 6)
    for (auto& x : p) x = 1.0f / static_cast<float>(E);
  return p;
}

}  // namespace router_reference
