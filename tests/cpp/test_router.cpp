// MOCE router (SPEC §2.4, R-1): route_row against an independent per-rank reference over the full
// 158,400-case grid, plus hand-worked cases, the seed weight bug, and the "r has no effect" rules.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "router_reference.h"
#include "strata/routing/router.h"
#include "strata/util/error.h"

using strata::routing::MoceParams;
using strata::routing::route_row;

namespace {

constexpr int K = 10;
using router_reference::plain_topk;
using router_reference::reference_route;
using router_reference::Routed;
using router_reference::trial_probs;

struct Fast {
  int32_t ids[K];
  float w[K];
  bool operator==(const Fast& o) const {
    for (int i = 0; i < K; ++i)
      if (ids[i] != o.ids[i] || w[i] != o.w[i]) return false;
    return true;
  }
};

Fast run(const std::vector<float>& probs, const uint8_t* res, float b, float r, int prot, bool draft, bool draft_row) {
  Fast f{};
  MoceParams p;
  p.resident_bonus = b;
  p.rank1_scale = r;
  p.protect = prot;
  p.draft = draft;
  route_row(probs.data(), static_cast<int>(probs.size()), K, res, p, draft_row, f.ids, f.w);
  return f;
}

bool matches(const Fast& f, const Routed& ref, double tol) {
  for (int i = 0; i < K; ++i) {
    if (f.ids[i] != ref.ids[static_cast<size_t>(i)]) return false;
    if (!(std::fabs(static_cast<double>(f.w[i]) - ref.weights[static_cast<size_t>(i)]) <= tol)) return false;
  }
  return true;
}

}  // namespace

TEST(hand_worked_cases) {
  const std::vector<float> probs = {0.4f, 0.3f, 0.2f, 0.1f};
  const std::vector<uint8_t> res = {0, 0, 1, 1};
  int32_t ids[3];
  float w[3];
  MoceParams p;
  // No bonus: plain top-2.
  route_row(probs.data(), 4, 2, res.data(), p, false, ids, w);
  CHECK_EQ(ids[0], 0);
  CHECK_EQ(ids[1], 1);
  // m = 4 from rank 1: resident 2 (0.2·4 = 0.8) beats 0.3; rank 0 stays unscaled.
  p.resident_bonus = 4.0f;
  route_row(probs.data(), 4, 2, res.data(), p, false, ids, w);
  CHECK_EQ(ids[0], 0);
  CHECK_EQ(ids[1], 2);
  CHECK_NEAR(w[0], 0.4 / 0.6, 1e-7);
  CHECK_NEAR(w[1], 0.2 / 0.6, 1e-7);
  // r_prot = 2: rank 1 unprotected by the bonus, rank 2 gets it.
  p.protect = 2;
  route_row(probs.data(), 4, 3, res.data(), p, false, ids, w);
  CHECK_EQ(ids[0], 0);
  CHECK_EQ(ids[1], 1);
  CHECK_EQ(ids[2], 2);
  // Rank-1 branch: r = 2, r_prot = 2: rank 1 resident 2 (0.4) beats 0.3; rank 2: 0.1·4 = 0.4 beats 0.3.
  p.rank1_scale = 2.0f;
  route_row(probs.data(), 4, 3, res.data(), p, false, ids, w);
  CHECK_EQ(ids[0], 0);
  CHECK_EQ(ids[1], 2);
  CHECK_EQ(ids[2], 3);
  CHECK_NEAR(w[2], 0.1 / 0.7, 1e-7);
  // No residency map: no bonus at all.
  route_row(probs.data(), 4, 3, nullptr, p, false, ids, w);
  CHECK_EQ(ids[1], 1);
  CHECK_EQ(ids[2], 2);
  // Rank 0 is never scaled: a resident 0.35 · 4 does not beat a nonresident 0.4 at rank 0.
  const std::vector<float> p2 = {0.4f, 0.35f, 0.25f};
  const std::vector<uint8_t> r2 = {0, 1, 0};
  MoceParams big;
  big.resident_bonus = 4.0f;
  route_row(p2.data(), 3, 1, r2.data(), big, false, ids, w);
  CHECK_EQ(ids[0], 0);
  CHECK_NEAR(w[0], 1.0, 1e-7);
}

TEST(ties_go_to_the_lowest_id) {
  // Equal raw probabilities.
  const std::vector<float> probs = {0.25f, 0.125f, 0.25f, 0.25f, 0.125f};
  int32_t ids[5];
  float w[5];
  route_row(probs.data(), 5, 5, nullptr, MoceParams{}, false, ids, w);
  const int32_t want[5] = {0, 2, 3, 1, 4};
  for (int i = 0; i < 5; ++i) CHECK_EQ(ids[i], want[i]);
  // A scaled resident tying a nonresident exactly (0.125·2 = 0.25): lower id wins either way round.
  const std::vector<float> p2 = {0.5f, 0.125f, 0.25f};
  const std::vector<uint8_t> r_hi = {0, 1, 0};  // resident id 1 < nonresident id 2
  const std::vector<uint8_t> r_lo = {0, 0, 1};
  MoceParams m2;
  m2.resident_bonus = 2.0f;
  route_row(p2.data(), 3, 2, r_hi.data(), m2, false, ids, w);
  CHECK_EQ(ids[1], 1);
  const std::vector<float> p3 = {0.5f, 0.25f, 0.125f};
  route_row(p3.data(), 3, 2, r_lo.data(), m2, false, ids, w);
  CHECK_EQ(ids[1], 1);  // nonresident id 1 (0.25) ties resident id 2 (0.125·2)
}

TEST(seed_bug_tail_keeps_r_and_is_divided_by_r) {
  // r > 1, r_prot > 1, m ≤ 1: the tail keeps r; the weight must be the original probability.
  const std::vector<float> probs = {0.5f, 0.2f, 0.15f, 0.15f};
  const std::vector<uint8_t> res = {0, 0, 1, 1};
  MoceParams p;
  p.resident_bonus = 0.5f;
  p.rank1_scale = 2.0f;
  p.protect = 2;
  int32_t ids[3];
  float w[3];
  route_row(probs.data(), 4, 3, res.data(), p, false, ids, w);
  CHECK_EQ(ids[0], 0);
  CHECK_EQ(ids[1], 2);  // 0.15·2 = 0.3 > 0.2
  CHECK_EQ(ids[2], 3);  // tail still carries r: 0.3 > 0.2
  CHECK_NEAR(w[1], 0.15 / 0.8, 1e-7);
  CHECK_NEAR(w[2], 0.15 / 0.8, 1e-7);  // the seed bug gave 0.3 / (0.5 + 0.15 + 0.3)
  CHECK_EQ(strata::routing::resident_multiplier(p, false, 5), 2.0f);
}

TEST(draft_rows_double_the_log_bonus_and_ignore_r) {
  MoceParams p;
  p.resident_bonus = 2.0f;
  p.rank1_scale = 4.0f;
  p.protect = 5;
  p.draft = true;
  CHECK_EQ(strata::routing::resident_multiplier(p, true, 0), 1.0f);
  CHECK_EQ(strata::routing::resident_multiplier(p, true, 1), 4.0f);   // b² from rank 1 (r_prot = 1)
  CHECK_EQ(strata::routing::resident_multiplier(p, false, 1), 4.0f);  // head row: r carried
  CHECK_EQ(strata::routing::resident_multiplier(p, false, 4), 4.0f);
  CHECK_EQ(strata::routing::resident_multiplier(p, false, 5), 2.0f);  // moves to m at r_prot
  p.draft = false;
  CHECK_EQ(strata::routing::resident_multiplier(p, true, 1), 4.0f);  // flag off: the row is a head row
  CHECK_EQ(strata::routing::resident_multiplier(p, true, 5), 2.0f);
}

TEST(bad_k_is_rejected) {
  std::vector<float> probs(8, 0.125f);
  int32_t ids[8];
  float w[8];
  CHECK_THROWS(route_row(probs.data(), 8, 0, nullptr, MoceParams{}, false, ids, w));
  CHECK_THROWS(route_row(probs.data(), 8, 9, nullptr, MoceParams{}, false, ids, w));
  std::vector<float> many(100, 0.01f);
  int32_t ids2[100];
  float w2[100];
  CHECK_THROWS(route_row(many.data(), 100, strata::routing::kMaxTopK + 1, nullptr, MoceParams{}, false, ids2, w2));
}

TEST(weight_floor) {
  std::vector<float> probs(16, 0.0f);
  probs[3] = 1e-6f;
  int32_t ids[2];
  float w[2];
  route_row(probs.data(), 16, 2, nullptr, MoceParams{}, false, ids, w);
  CHECK_EQ(ids[0], 3);
  CHECK_EQ(ids[1], 0);
  CHECK_NEAR(w[0], 1e-6 * 16384.0, 1e-9);
  CHECK_EQ(w[1], 0.0f);
}

TEST(full_grid_against_reference) {
  const auto t0 = std::chrono::steady_clock::now();
  const int Es[3] = {32, 256, 512};
  const float bs[5] = {0.5f, 1.0f, 2.0f, 4.0f, std::exp(0.85f)};
  const float rs[5] = {0.5f, 1.0f, 2.0f, 4.0f, std::exp(0.4f)};
  std::mt19937_64 rng(20240611);
  long cases = 0, ref_fail = 0, r_effect_fail = 0, plain_fail = 0, head_flag_fail = 0, sum_fail = 0;
  long bonus_changed = 0, r_changed = 0;
  for (int trial = 0; trial < 12; ++trial) {
    for (int E : Es) {
      const std::vector<float> probs = trial_probs(trial, E, rng);
      const Routed plain = plain_topk(probs, K);
      std::vector<uint8_t> all_miss(static_cast<size_t>(E), 0), all_hit(static_cast<size_t>(E), 1),
          mixed(static_cast<size_t>(E));
      const double frac = 0.15 + 0.06 * trial;
      std::bernoulli_distribution coin(frac);
      for (auto& x : mixed) x = coin(rng) ? 1 : 0;
      const std::vector<uint8_t>* maps[4] = {nullptr, &all_miss, &all_hit, &mixed};
      for (int mi = 0; mi < 4; ++mi) {
        const uint8_t* res = maps[mi] ? maps[mi]->data() : nullptr;
        for (float b : bs) {
          for (int prot = 0; prot <= 10; ++prot) {
            for (int draft = 0; draft < 2; ++draft) {
              for (int row = 0; row < 2; ++row) {
                const bool draft_row = row == 1;
                const Fast r_one = run(probs, res, b, 1.0f, prot, draft, draft_row);
                for (float r : rs) {
                  ++cases;
                  const Fast f = run(probs, res, b, r, prot, draft, draft_row);
                  const Routed ref = reference_route(probs, K, maps[mi], b, r, prot, draft, draft_row);
                  if (!matches(f, ref, 2e-7)) {
                    if (++ref_fail <= 5)
                      std::fprintf(stderr, "mismatch trial=%d E=%d map=%d b=%g r=%g prot=%d draft=%d row=%d\n", trial,
                                   E, mi, double(b), double(r), prot, draft, row);
                  }
                  // r has no effect when r ≤ 1 or the row is a draft row (flag on).
                  if ((r <= 1.0f || (draft && draft_row)) && !(f == r_one)) ++r_effect_fail;
                  if (!(f == r_one)) ++r_changed;
                  // Plain top-K: no map, nobody resident, everybody resident (one multiplier per rank),
                  // or neither r nor the bonus can apply.
                  const float m_eff = (draft && draft_row) ? b * b : b;
                  const bool is_plain = mi != 3 || (m_eff <= 1.0f && (r <= 1.0f || (draft && draft_row)));
                  if (is_plain && !matches(f, plain, 2e-7)) ++plain_fail;
                  if (!std::equal(f.ids, f.ids + K, plain.ids.begin())) ++bonus_changed;
                  // The head row ignores the draft flag.
                  if (!draft_row && draft && !(f == run(probs, res, b, r, prot, false, false))) ++head_flag_fail;
                  double s = 0.0;
                  for (float x : f.w) s += x;
                  double raw = 0.0;
                  for (int32_t id : f.ids) raw += probs[static_cast<size_t>(id)];
                  if (raw >= 1.0 / 16384 && std::fabs(s - 1.0) > 2e-6) ++sum_fail;
                }
              }
            }
          }
        }
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "router grid: %ld cases in %.2f s; ref mismatches %ld, r-effect violations %ld, plain-topK "
      "violations %ld, head-flag violations %ld, weight-sum violations %ld; cases where MOCE changed "
      "the plain top-K %ld, where r changed the output %ld\n",
      cases, secs, ref_fail, r_effect_fail, plain_fail, head_flag_fail, sum_fail, bonus_changed, r_changed);
  CHECK_EQ(cases, 158400L);
  CHECK_EQ(ref_fail, 0L);
  CHECK_EQ(r_effect_fail, 0L);
  CHECK_EQ(plain_fail, 0L);
  CHECK_EQ(head_flag_fail, 0L);
  CHECK_EQ(sum_fail, 0L);
  CHECK(bonus_changed > 10000);  // the grid really exercises the bonus
  CHECK(r_changed > 1000);       // ... and the rank-1 branch
}

TEST(speed_e512_k10) {
  // Measures only (never gates on time): route_row throughput at the production shape.
  std::mt19937_64 rng(7);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 64; ++i) rows.push_back(trial_probs(i % 12, 512, rng));
  std::vector<uint8_t> res(512);
  for (auto& x : res) x = (rng() & 3) == 0;
  MoceParams p;
  p.resident_bonus = std::exp(0.85f);
  p.rank1_scale = 2.0f;
  p.protect = 3;
  int32_t ids[K];
  float w[K];
  int64_t check = 0;
  const int iters = 200000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    route_row(rows[static_cast<size_t>(i & 63)].data(), 512, K, res.data(), p, (i & 1) != 0, ids, w);
    check += ids[K - 1];
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / iters;
  std::printf("route_row E=512 K=10: %.0f ns/row (checksum %lld)\n", ns, static_cast<long long>(check));
  CHECK(check > 0);
}

TEST(non_finite_probabilities_are_rejected_not_routed_around) {
  std::vector<float> probs(8, 0.125f);
  int32_t ids[3];
  float w[3];
  const std::vector<uint8_t> resident = {1, 0, 1, 0, 1, 0, 1, 0};
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    for (int at : {0, 5, 7}) {
      std::vector<float> row = probs;
      row[static_cast<size_t>(at)] = bad;
      // One bad value among enough good candidates is still refused, with or without a residency map.
      CHECK_THROWS(route_row(row.data(), 8, 1, nullptr, MoceParams{}, false, ids, w));
      CHECK_THROWS(route_row(row.data(), 8, 3, resident.data(), MoceParams{}, false, ids, w));
    }
  }
  route_row(probs.data(), 8, 3, nullptr, MoceParams{}, false, ids, w);
  CHECK_EQ(ids[0], 0);
}
