// MoE plan (SPEC §2.4 Plan, R-2): build_plan against an independent std::stable_sort reference over
// random windows, split (residency map) and unsplit (no map), plus the structural invariants.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "strata/routing/plan.h"

using strata::routing::build_plan;
using strata::routing::Plan;

namespace {

struct Ref {
  std::vector<int32_t> slot_entry, group_expert, group_offset;
  int n_resident_groups = 0, n_resident_slots = 0;
};

Ref reference_plan(const std::vector<int32_t>& ids, int k, const std::vector<uint8_t>* resident) {
  std::vector<int32_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t e) {
    const int32_t x = ids[static_cast<size_t>(e)];
    const bool res = resident && (*resident)[static_cast<size_t>(x)];
    return std::pair<int, int32_t>(res ? 0 : 1, x);
  };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
  Ref r;
  r.slot_entry = order;
  for (size_t s = 0; s < order.size(); ++s) {
    const auto kk = key(order[s]);
    if (s == 0 || kk != key(order[s - 1])) {
      r.group_expert.push_back(kk.second);
      r.group_offset.push_back(static_cast<int32_t>(s));
      if (kk.first == 0) ++r.n_resident_groups;
    }
    if (kk.first == 0) ++r.n_resident_slots;
  }
  r.group_offset.push_back(static_cast<int32_t>(order.size()));
  (void)k;
  return r;
}

bool same_plan(const Plan& p, const Ref& r) {
  return p.slot_entry == r.slot_entry && p.group_expert == r.group_expert && p.group_offset == r.group_offset &&
         p.n_resident_groups == r.n_resident_groups && p.n_resident_slots == r.n_resident_slots;
}

// Invariants checked directly on the plan, without the reference.
bool invariants_hold(const Plan& p, const std::vector<int32_t>& ids, const std::vector<uint8_t>* resident) {
  const size_t n = ids.size();
  if (p.slot_entry.size() != n || p.entry_slot.size() != n) return false;
  std::vector<int> seen(n, 0);
  for (size_t s = 0; s < n; ++s) {
    const int32_t e = p.slot_entry[s];
    if (e < 0 || static_cast<size_t>(e) >= n || p.entry_slot[static_cast<size_t>(e)] != static_cast<int32_t>(s))
      return false;
    ++seen[static_cast<size_t>(e)];
  }
  for (int c : seen)
    if (c != 1) return false;
  if (p.group_offset.size() != p.group_expert.size() + 1 || p.group_offset.front() != 0 ||
      p.group_offset.back() != static_cast<int32_t>(n))
    return false;
  for (int g = 0; g < p.groups(); ++g) {
    const bool res = resident && (*resident)[static_cast<size_t>(p.group_expert[static_cast<size_t>(g)])];
    if (res != (g < p.n_resident_groups)) return false;
    if (g > 0 && g != p.n_resident_groups &&
        p.group_expert[static_cast<size_t>(g)] <= p.group_expert[static_cast<size_t>(g - 1)])
      return false;
    const int32_t b = p.group_offset[static_cast<size_t>(g)], e = p.group_offset[static_cast<size_t>(g) + 1];
    if (e <= b) return false;
    for (int32_t s = b; s < e; ++s) {
      if (ids[static_cast<size_t>(p.slot_entry[static_cast<size_t>(s)])] != p.group_expert[static_cast<size_t>(g)])
        return false;
      if (s > b && p.row_of_slot(s) < p.row_of_slot(s - 1)) return false;
    }
  }
  return p.n_resident_slots == p.group_offset[static_cast<size_t>(p.n_resident_groups)];
}

}  // namespace

TEST(small_worked_example) {
  // 3 rows, k = 2; experts 0..4; resident {3}.
  const std::vector<int32_t> ids = {4, 3, 1, 4, 3, 1};
  const std::vector<uint8_t> res = {0, 0, 0, 1, 0};
  Plan p;
  build_plan(ids.data(), 3, 2, 5, res.data(), p);
  CHECK_EQ(p.groups(), 3);
  CHECK_EQ(p.n_resident_groups, 1);
  CHECK(p.group_expert == (std::vector<int32_t>{3, 1, 4}));
  CHECK(p.group_offset == (std::vector<int32_t>{0, 2, 4, 6}));
  CHECK(p.slot_entry == (std::vector<int32_t>{1, 4, 2, 5, 0, 3}));
  CHECK_EQ(p.row_of_slot(1), 2);
  CHECK_EQ(p.rank_of_slot(1), 0);
  CHECK_EQ(p.entry_slot[3], 5);
  build_plan(ids.data(), 3, 2, 5, nullptr, p);  // unsplit
  CHECK_EQ(p.n_resident_groups, 0);
  CHECK(p.group_expert == (std::vector<int32_t>{1, 3, 4}));
}

TEST(bad_ids_rejected) {
  const std::vector<int32_t> ids = {0, 5};
  Plan p;
  CHECK_THROWS(build_plan(ids.data(), 1, 2, 5, nullptr, p));
  const std::vector<int32_t> neg = {0, -1};
  CHECK_THROWS(build_plan(neg.data(), 1, 2, 5, nullptr, p));
  CHECK_THROWS(build_plan(ids.data(), 1, 0, 5, nullptr, p));
  build_plan(ids.data(), 0, 2, 5, nullptr, p);  // an empty window is a valid empty plan
  CHECK_EQ(p.groups(), 0);
  CHECK(p.group_offset == std::vector<int32_t>{0});
}

TEST(random_windows_against_stable_sort) {
  std::mt19937_64 rng(99);
  Plan p;  // reused across windows, as the decode loop does
  int windows = 0, fails = 0, inv_fails = 0;
  for (int w = 0; w < 3000; ++w) {
    const int E = std::uniform_int_distribution<int>(1, 512)(rng);
    const int k = std::uniform_int_distribution<int>(1, std::min(10, E))(rng);
    int rows = std::uniform_int_distribution<int>(1, 512)(rng);
    if (w % 4 == 0) rows = std::uniform_int_distribution<int>(1, 8)(rng);  // decode / verify windows
    // Skewed popularity half the time, as real routers are.
    const bool skew = w % 2 == 1;
    std::vector<int32_t> ids(static_cast<size_t>(rows) * static_cast<size_t>(k));
    std::vector<int32_t> perm(static_cast<size_t>(E));
    std::iota(perm.begin(), perm.end(), 0);
    for (int r = 0; r < rows; ++r) {
      // k distinct experts per row (what route_row gives); every 10th window allows repeats.
      if (w % 10 == 3) {
        for (int j = 0; j < k; ++j)
          ids[static_cast<size_t>(r * k + j)] = std::uniform_int_distribution<int>(0, E - 1)(rng);
        continue;
      }
      for (int j = 0; j < k; ++j) {
        int pick = skew ? std::min(E - 1, static_cast<int>(std::exponential_distribution<double>(0.2)(rng)) + j)
                        : std::uniform_int_distribution<int>(j, E - 1)(rng);
        if (pick < j) pick = j;
        std::swap(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(pick)]);
        ids[static_cast<size_t>(r * k + j)] = perm[static_cast<size_t>(j)];
      }
    }
    std::vector<uint8_t> res(static_cast<size_t>(E));
    const int mode = w % 5;  // 0 none-resident map, 1 all resident, 2..4 random fractions
    const double frac = mode == 0 ? 0.0 : mode == 1 ? 1.0 : 0.1 + 0.3 * (mode - 2);
    std::bernoulli_distribution coin(frac);
    for (auto& x : res) x = coin(rng);
    for (int split = 0; split < 2; ++split) {
      const std::vector<uint8_t>* map = split ? &res : nullptr;
      build_plan(ids.data(), rows, k, E, map ? map->data() : nullptr, p);
      const Ref ref = reference_plan(ids, k, map);
      ++windows;
      if (!same_plan(p, ref)) ++fails;
      if (!invariants_hold(p, ids, map)) ++inv_fails;
    }
  }
  std::printf("plan: %d windows (split + unsplit), %d reference mismatches, %d invariant failures\n", windows, fails,
              inv_fails);
  CHECK_EQ(fails, 0);
  CHECK_EQ(inv_fails, 0);
}
