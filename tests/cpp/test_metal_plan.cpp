// The Metal MoE plan kernel (metal/kernels/plan.h, R-2) on the emulator: random windows against an
// independent std::stable_sort by (nonresident, expert) and against the CPU build_plan, split and
// unsplit; bad ids reported through the header; an empty window.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/dispatch.h"
#include "strata/routing/plan.h"

using strata::mtl::BufferRef;
using strata::mtl::EmuDevice;

namespace {

struct GpuPlan {
  PlanHeader hdr{};
  std::vector<int32_t> group_expert, group_offset, slot_entry, entry_slot;
};

GpuPlan run_plan(EmuDevice& dev, const std::vector<int32_t>& ids, int k, int E, const std::vector<uint8_t>* res) {
  const size_t n = ids.size();
  auto b_ids = dev.new_buffer(std::max<size_t>(n, 1) * 4);
  auto b_res = dev.new_buffer(static_cast<size_t>(E));
  auto b_hdr = dev.new_buffer(sizeof(PlanHeader));
  const size_t max_groups = std::min<size_t>(static_cast<size_t>(E), n) + 1;
  auto b_ge = dev.new_buffer(max_groups * 4);
  auto b_go = dev.new_buffer((max_groups + 1) * 4);
  auto b_se = dev.new_buffer(std::max<size_t>(n, 1) * 4);
  auto b_es = dev.new_buffer(std::max<size_t>(n, 1) * 4);
  std::copy(ids.begin(), ids.end(), static_cast<int32_t*>(b_ids->contents()));
  if (res) std::copy(res->begin(), res->end(), static_cast<uint8_t*>(b_res->contents()));
  PlanArgs a{};
  a.n_entries = static_cast<uint32_t>(n);
  a.k = static_cast<uint32_t>(k);
  a.n_experts = static_cast<uint32_t>(E);
  a.has_resident = res ? 1u : 0u;
  strata::mtl::encode_plan(dev, a, BufferRef{b_ids.get()}, BufferRef{b_res.get()}, BufferRef{b_hdr.get()},
                           BufferRef{b_ge.get()}, BufferRef{b_go.get()}, BufferRef{b_se.get()}, BufferRef{b_es.get()});
  dev.submit();
  GpuPlan g;
  g.hdr = *static_cast<const PlanHeader*>(b_hdr->contents());
  if (g.hdr.bad_entry >= 0) return g;
  const auto* ge = static_cast<const int32_t*>(b_ge->contents());
  const auto* go = static_cast<const int32_t*>(b_go->contents());
  g.group_expert.assign(ge, ge + g.hdr.n_groups);
  g.group_offset.assign(go, go + g.hdr.n_groups + 1);
  g.slot_entry.assign(static_cast<const int32_t*>(b_se->contents()), static_cast<const int32_t*>(b_se->contents()) + n);
  g.entry_slot.assign(static_cast<const int32_t*>(b_es->contents()), static_cast<const int32_t*>(b_es->contents()) + n);
  return g;
}

// The independent reference: a stable sort of the entries by (nonresident, expert).
std::vector<int32_t> stable_order(const std::vector<int32_t>& ids, const std::vector<uint8_t>* res) {
  std::vector<int32_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t e) {
    const int32_t x = ids[static_cast<size_t>(e)];
    return std::pair<int, int32_t>(res && (*res)[static_cast<size_t>(x)] ? 0 : 1, x);
  };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
  return order;
}

}  // namespace

TEST(worked_example) {
  EmuDevice dev;
  const std::vector<int32_t> ids = {4, 3, 1, 4, 3, 1};
  const std::vector<uint8_t> res = {0, 0, 0, 1, 0};
  GpuPlan g = run_plan(dev, ids, 2, 5, &res);
  CHECK_EQ(g.hdr.bad_entry, -1);
  CHECK_EQ(g.hdr.n_groups, 3u);
  CHECK_EQ(g.hdr.n_resident_groups, 1u);
  CHECK_EQ(g.hdr.n_resident_slots, 2u);
  CHECK(g.group_expert == (std::vector<int32_t>{3, 1, 4}));
  CHECK(g.group_offset == (std::vector<int32_t>{0, 2, 4, 6}));
  CHECK(g.slot_entry == (std::vector<int32_t>{1, 4, 2, 5, 0, 3}));
  CHECK_EQ(g.entry_slot[3], 5);
  GpuPlan u = run_plan(dev, ids, 2, 5, nullptr);
  CHECK_EQ(u.hdr.n_resident_groups, 0u);
  CHECK(u.group_expert == (std::vector<int32_t>{1, 3, 4}));
  GpuPlan empty = run_plan(dev, {}, 2, 5, nullptr);
  CHECK_EQ(empty.hdr.n_groups, 0u);
  CHECK(empty.group_offset == std::vector<int32_t>{0});
}

TEST(bad_ids_are_reported) {
  EmuDevice dev;
  GpuPlan g = run_plan(dev, {0, 1, 2, 7, 3, -1}, 2, 5, nullptr);
  CHECK_EQ(g.hdr.bad_entry, 3);
  CHECK_EQ(g.hdr.n_groups, 0u);
  PlanArgs a{};
  a.n_experts = 2048;
  a.k = 1;
  auto b = dev.new_buffer(64);
  CHECK_THROWS(strata::mtl::encode_plan(dev, a, BufferRef{b.get()}, BufferRef{b.get()}, BufferRef{b.get()},
                                        BufferRef{b.get()}, BufferRef{b.get()}, BufferRef{b.get()},
                                        BufferRef{b.get()}));
}

TEST(random_windows_against_stable_sort_and_cpu) {
  EmuDevice dev;
  std::mt19937_64 rng(4242);
  strata::routing::Plan cpu;
  int windows = 0, sort_fail = 0, cpu_fail = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int w = 0; w < 1000; ++w) {
    const int E = std::uniform_int_distribution<int>(1, w % 6 == 0 ? 1024 : 512)(rng);
    const int k = std::uniform_int_distribution<int>(1, std::min(10, E))(rng);
    int rows = std::uniform_int_distribution<int>(1, 512)(rng);
    if (w % 3 == 0) rows = std::uniform_int_distribution<int>(1, 8)(rng);
    std::vector<int32_t> ids(static_cast<size_t>(rows) * static_cast<size_t>(k));
    std::vector<int32_t> perm(static_cast<size_t>(E));
    std::iota(perm.begin(), perm.end(), 0);
    const bool skew = w % 2 == 1;
    for (int r = 0; r < rows; ++r) {
      if (w % 10 == 3) {  // repeats allowed
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
    const int mode = w % 5;
    std::bernoulli_distribution coin(mode == 0 ? 0.0 : mode == 1 ? 1.0 : 0.1 + 0.3 * (mode - 2));
    for (auto& x : res) x = coin(rng);
    for (int split = 0; split < 2; ++split) {
      const std::vector<uint8_t>* map = split ? &res : nullptr;
      GpuPlan g = run_plan(dev, ids, k, E, map);
      ++windows;
      // Against the stable sort: slot order, groups, offsets, inverse map.
      const std::vector<int32_t> order = stable_order(ids, map);
      bool ok = g.hdr.bad_entry == -1 && g.slot_entry == order;
      for (size_t s = 0; ok && s < order.size(); ++s)
        ok = g.entry_slot[static_cast<size_t>(order[s])] == static_cast<int32_t>(s);
      if (!ok) ++sort_fail;
      strata::routing::build_plan(ids.data(), rows, k, E, map ? map->data() : nullptr, cpu);
      if (g.slot_entry != cpu.slot_entry || g.entry_slot != cpu.entry_slot || g.group_expert != cpu.group_expert ||
          g.group_offset != cpu.group_offset || static_cast<int>(g.hdr.n_resident_groups) != cpu.n_resident_groups ||
          static_cast<int>(g.hdr.n_resident_slots) != cpu.n_resident_slots)
        ++cpu_fail;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("metal plan (emulated): %d windows in %.1f s, %d stable-sort mismatches, %d CPU mismatches\n", windows, s,
              sort_fail, cpu_fail);
  CHECK_EQ(sort_fail, 0);
  CHECK_EQ(cpu_fail, 0);
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}
