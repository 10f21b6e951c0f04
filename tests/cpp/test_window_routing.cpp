// Streaming-aware verification windows (routing/window_routing.h): route_window_rows against a
// reference written from the rule's text with the independent per-rank MOCE reference of
// router_reference.h, and the property the rule exists for — a window never requests a non-resident
// expert that plain top-K routing of the same rows would not have requested.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "router_reference.h"
#include "strata/routing/window_routing.h"

using strata::routing::MoceParams;

namespace {

struct Window {
  int R, E, k, first_draft;
  std::vector<float> probs;       // [R][E]
  std::vector<uint8_t> resident;  // [E]
  bool has_map;
};

Window random_window(std::mt19937_64& rng, int trial) {
  std::uniform_int_distribution<int> rows(1, 8), ks(1, 8), coin(0, 3);
  const int Es[4] = {16, 32, 64, 256};
  Window w;
  w.E = Es[trial % 4];
  w.R = rows(rng);
  w.k = std::min(ks(rng), w.E / 2);
  w.first_draft = std::uniform_int_distribution<int>(-1, w.R)(rng);
  for (int r = 0; r < w.R; ++r) {
    const auto p = router_reference::trial_probs((trial + r) % 12, w.E, rng);
    w.probs.insert(w.probs.end(), p.begin(), p.end());
  }
  w.has_map = coin(rng) != 0;
  const double frac = std::uniform_real_distribution<double>(0.0, 0.6)(rng);
  for (int e = 0; e < w.E; ++e) w.resident.push_back(std::uniform_real_distribution<double>()(rng) < frac ? 1 : 0);
  return w;
}

std::vector<float> row(const Window& w, int r) {
  return {w.probs.begin() + static_cast<long>(r) * w.E, w.probs.begin() + static_cast<long>(r + 1) * w.E};
}

// The text: target rows with the configured parameters; draft row r with the draft-row rule
// (m = b², r_prot = 1, b = window bonus) against resident ∪ everything rows < r picked.
std::vector<int32_t> reference_window(const Window& w, double b, double moce_b, bool moce_draft) {
  std::vector<int32_t> ids;
  const bool window = b > 1.0 && w.first_draft >= 0 && w.first_draft < w.R;
  std::vector<uint8_t> seen(static_cast<size_t>(w.E), 0);
  for (int e = 0; e < w.E; ++e) seen[static_cast<size_t>(e)] = w.has_map && w.resident[static_cast<size_t>(e)];
  for (int r = 0; r < w.R; ++r) {
    const bool draft = w.first_draft >= 0 && r >= w.first_draft;
    router_reference::Routed out;
    if (window && draft)
      out = router_reference::reference_route(row(w, r), w.k, &seen, static_cast<float>(b), 1.0, 1, true, true);
    else
      out = router_reference::reference_route(row(w, r), w.k, w.has_map ? &w.resident : nullptr,
                                              static_cast<float>(moce_b), 1.0, 0, moce_draft, draft);
    for (int32_t id : out.ids) {
      ids.push_back(id);
      seen[static_cast<size_t>(id)] = 1;
    }
  }
  return ids;
}

std::vector<int32_t> engine_window(const Window& w, const MoceParams& p) {
  std::vector<int32_t> ids(static_cast<size_t>(w.R * w.k));
  std::vector<float> weights(ids.size());
  std::vector<uint8_t> map(static_cast<size_t>(w.E), 7);
  strata::routing::route_window_rows(w.probs.data(), w.R, w.E, w.k, w.has_map ? w.resident.data() : nullptr, p,
                                     w.first_draft, map.data(), ids.data(), weights.data());
  return ids;
}

std::set<int32_t> new_experts(const Window& w, const std::vector<int32_t>& ids) {
  std::set<int32_t> s;
  for (int32_t id : ids)
    if (!w.has_map || !w.resident[static_cast<size_t>(id)]) s.insert(id);
  return s;
}

}  // namespace

TEST(window_routing_matches_the_reference_and_never_requests_more) {
  std::mt19937_64 rng(20261201);
  const float bonuses[4] = {1.0f, 1.5f, 2.718281828f, 20.0f};
  int cases = 0, changed = 0, fewer = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const Window w = random_window(rng, trial);
    for (float b : bonuses) {
      MoceParams p;
      p.resident_bonus = trial % 3 == 0 ? 2.0f : 1.0f;  // target rows may carry MOCE too
      p.draft = trial % 2 == 0;
      p.window_bonus = b;
      const auto got = engine_window(w, p);
      const auto want = reference_window(w, b, p.resident_bonus, p.draft);
      CHECK(got == want);
      MoceParams off = p;
      off.window_bonus = 1.0f;
      if (b <= 1.0f) CHECK(got == engine_window(w, off));  // off changes nothing
      // Every non-resident expert the window requests, plain top-K routing of the same rows requests too.
      const auto plain = engine_window(w, MoceParams{});
      const auto mine = new_experts(w, got), theirs = new_experts(w, plain);
      for (int32_t e : mine) CHECK(theirs.count(e) == 1);
      changed += got != plain;
      fewer += mine.size() < theirs.size();
      ++cases;
    }
  }
  std::printf("window routing: %d cases, %d differ from plain top-K, %d requested fewer non-resident experts\n", cases,
              changed, fewer);
  CHECK(changed > 1000);  // the grid exercises the rule
  CHECK(fewer > 500);
}

TEST(window_map_helpers) {
  std::vector<uint8_t> map(6, 9);
  const uint8_t resident[6] = {0, 1, 0, 0, 0, 3};
  const int32_t ids[3] = {2, 2, 4};
  strata::routing::window_map_begin(map.data(), resident, 6, ids, 3);
  CHECK((map == std::vector<uint8_t>{0, 1, 1, 0, 1, 1}));
  strata::routing::window_map_begin(map.data(), nullptr, 6, ids, 1);
  CHECK((map == std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));
  const int32_t more[2] = {0, 5};
  strata::routing::window_map_add(map.data(), more, 2);
  CHECK((map == std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  MoceParams p;
  CHECK(!strata::routing::window_routing_on(p));
  p.window_bonus = 1.5f;
  CHECK(strata::routing::window_routing_on(p));
  const MoceParams d = strata::routing::window_draft_params(p);
  CHECK(d.draft && d.protect == 1 && d.resident_bonus == 1.5f && d.rank1_scale == 1.0f);
}

// Exact window cuts: window_rows_kept against the rule's text (the first row >= cut_from_row with an expert
// that is neither resident nor requested by a row before it), over random windows.
TEST(window_rows_kept_is_the_first_row_that_would_read) {
  std::mt19937_64 rng(20261202);
  std::uniform_int_distribution<int> rows(1, 8), ks(1, 4), es(4, 32);
  int cuts = 0, whole = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int R = rows(rng), k = ks(rng), E = std::max(es(rng), k);
    const int cut_from = std::uniform_int_distribution<int>(-1, R)(rng);
    std::vector<uint8_t> resident(static_cast<std::size_t>(E));
    const int density = trial % 4;  // 0: nobody resident ... 3: three in four
    for (auto& r : resident) r = std::uniform_int_distribution<int>(0, 3)(rng) < density ? 1 : 0;
    std::vector<int32_t> ids(static_cast<std::size_t>(R * k));
    for (auto& e : ids) e = std::uniform_int_distribution<int>(0, E - 1)(rng);
    int want = R;
    if (cut_from >= 1) {
      std::set<int32_t> read;
      for (int r = 0; r < R && want == R; ++r) {
        for (int i = 0; i < k; ++i) {
          const int32_t e = ids[static_cast<std::size_t>(r * k + i)];
          if (r >= cut_from && resident[static_cast<std::size_t>(e)] == 0 && read.count(e) == 0) want = r;
        }
        for (int i = 0; i < k; ++i) read.insert(ids[static_cast<std::size_t>(r * k + i)]);
      }
    }
    std::vector<uint8_t> map(static_cast<std::size_t>(E), 7);
    CHECK(strata::routing::window_rows_kept(resident.data(), E, ids.data(), k, R, cut_from, map.data()) == want);
    // No residency map (mmap mode): nothing is ever read, nothing is cut.
    CHECK(strata::routing::window_rows_kept(nullptr, E, ids.data(), k, R, cut_from, map.data()) == R);
    cuts += want < R;
    whole += want == R;
  }
  CHECK(cuts > 2000 && whole > 2000);  // the grid exercises both outcomes
}
