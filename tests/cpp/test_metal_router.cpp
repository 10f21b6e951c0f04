// The Metal router kernel (metal/kernels/router.h) through the dispatch plan on the emulator, against
// the independent per-rank reference over the full SPEC §2.4 grid (158,400 cases: ids exact, weights
// within 2e-7) and against the CPU route_row; the fused softmax against the CPU softmax + route_row;
// NaN rows reported through the status buffer.
#define STRATA_TEST_MAIN
#include "check.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/dispatch.h"
#include "router_reference.h"
#include "strata/engine/ops.h"
#include "strata/routing/router.h"
#include "strata/util/thread_pool.h"

using router_reference::reference_route;
using router_reference::Routed;
using strata::mtl::BufferRef;
using strata::mtl::EmuDevice;

namespace {

constexpr int K = 10;

struct Batch {
  std::unique_ptr<strata::mtl::Buffer> x, res, ids, w, status;
  int rows = 0;
};

Batch make_batch(EmuDevice& dev, int rows, int E) {
  Batch b;
  b.rows = rows;
  b.x = dev.new_buffer(static_cast<size_t>(rows) * E * 4);
  b.res = dev.new_buffer(static_cast<size_t>(rows) * E);
  b.ids = dev.new_buffer(static_cast<size_t>(rows) * K * 4);
  b.w = dev.new_buffer(static_cast<size_t>(rows) * K * 4);
  b.status = dev.new_buffer(static_cast<size_t>(rows) * 4);
  return b;
}

RouteArgs args(int rows, int E, float b, float r, int prot, bool draft, int draft_from, bool has_res) {
  RouteArgs a{};
  a.n_rows = static_cast<uint32_t>(rows);
  a.n_experts = static_cast<uint32_t>(E);
  a.k = K;
  a.row_stride = static_cast<uint32_t>(E);
  a.resident_bonus = b;
  a.rank1_scale = r;
  a.protect = prot;
  a.draft = draft ? 1u : 0u;
  a.draft_from_row = draft_from;
  a.has_resident = has_res ? 1u : 0u;
  a.resident_stride = static_cast<uint32_t>(E);
  a.softmax = 0;
  return a;
}

void run(EmuDevice& dev, const RouteArgs& a, Batch& b) {
  strata::mtl::encode_route(dev, a, BufferRef{b.x.get()}, BufferRef{b.res.get()}, BufferRef{b.ids.get()},
                            BufferRef{b.w.get()}, BufferRef{b.status.get()});
  dev.submit();
}

}  // namespace

TEST(full_grid_against_reference_and_cpu) {
  const auto t0 = std::chrono::steady_clock::now();
  const int Es[3] = {32, 256, 512};
  const float bs[5] = {0.5f, 1.0f, 2.0f, 4.0f, std::exp(0.85f)};
  const float rs[5] = {1.0f, 0.5f, 2.0f, 4.0f, std::exp(0.4f)};  // r = 1 first: the no-effect baseline
  // The grid's rows, drawn in test_router's order (trial, then E): probabilities and the mixed map.
  std::mt19937_64 rng(20240611);
  std::vector<float> probs[12][3];
  std::vector<uint8_t> mixed[12][3];
  for (int trial = 0; trial < 12; ++trial)
    for (int ei = 0; ei < 3; ++ei) {
      const int E = Es[ei];
      probs[trial][ei] = router_reference::trial_probs(trial, E, rng);
      mixed[trial][ei].resize(static_cast<size_t>(E));
      std::bernoulli_distribution coin(0.15 + 0.06 * trial);
      for (auto& x : mixed[trial][ei]) x = coin(rng) ? 1 : 0;
    }

  strata::ThreadPool pool(2);
  strata::emu::Options opt;
  opt.pool = &pool;
  EmuDevice dev(opt);
  long cases = 0, ref_fail = 0, cpu_fail = 0, r_effect_fail = 0, status_fail = 0;
  double max_w_err = 0.0;
  for (int ei = 0; ei < 3; ++ei) {
    const int E = Es[ei];
    // Batch with a map: rows (row kind, trial, map in {all-miss, all-hit, mixed}); head rows first.
    const int map_rows = 2 * 12 * 3;
    Batch with = make_batch(dev, map_rows, E);
    Batch none = make_batch(dev, 2 * 12, E);
    for (int kind = 0; kind < 2; ++kind)
      for (int trial = 0; trial < 12; ++trial) {
        const std::vector<float>& p = probs[trial][ei];
        std::memcpy(static_cast<float*>(none.x->contents()) + (kind * 12 + trial) * E, p.data(),
                    sizeof(float) * static_cast<size_t>(E));
        for (int m = 0; m < 3; ++m) {
          const int row = (kind * 12 + trial) * 3 + m;
          std::memcpy(static_cast<float*>(with.x->contents()) + row * E, p.data(),
                      sizeof(float) * static_cast<size_t>(E));
          uint8_t* res = static_cast<uint8_t*>(with.res->contents()) + row * E;
          for (int e = 0; e < E; ++e) res[e] = m == 0 ? 0 : m == 1 ? 1 : mixed[trial][ei][static_cast<size_t>(e)];
        }
      }
    for (float b : bs)
      for (int prot = 0; prot <= 10; ++prot)
        for (int draft = 0; draft < 2; ++draft) {
          std::vector<int32_t> ids_r1_with, ids_r1_none;
          std::vector<float> w_r1_with, w_r1_none;
          for (int ri = 0; ri < 5; ++ri) {
            const float r = rs[ri];
            run(dev, args(map_rows, E, b, r, prot, draft != 0, map_rows / 2, true), with);
            run(dev, args(2 * 12, E, b, r, prot, draft != 0, 12, false), none);
            for (int pass = 0; pass < 2; ++pass) {
              Batch& bt = pass == 0 ? with : none;
              const int* ids = static_cast<const int*>(bt.ids->contents());
              const float* w = static_cast<const float*>(bt.w->contents());
              const int* st = static_cast<const int*>(bt.status->contents());
              for (int row = 0; row < bt.rows; ++row) {
                ++cases;
                const int per_kind = pass == 0 ? 36 : 12;
                const int kind = row / per_kind;
                const int trial = pass == 0 ? (row % 36) / 3 : row % 12;
                const int m = pass == 0 ? row % 3 : -1;
                const std::vector<float>& p = probs[trial][ei];
                std::vector<uint8_t> map;
                if (m >= 0)
                  map.assign(static_cast<const uint8_t*>(bt.res->contents()) + row * E,
                             static_cast<const uint8_t*>(bt.res->contents()) + (row + 1) * E);
                const bool draft_row = kind == 1;
                const Routed ref = reference_route(p, K, m >= 0 ? &map : nullptr, b, r, prot, draft != 0, draft_row);
                int32_t cids[K];
                float cw[K];
                strata::routing::MoceParams mp;
                mp.resident_bonus = b;
                mp.rank1_scale = r;
                mp.protect = prot;
                mp.draft = draft != 0;
                strata::routing::route_row(p.data(), E, K, m >= 0 ? map.data() : nullptr, mp, draft_row, cids, cw);
                bool ok_ref = st[row] == 0, ok_cpu = st[row] == 0;
                if (st[row] != 0) ++status_fail;
                for (int i = 0; i < K; ++i) {
                  const int32_t id = ids[row * K + i];
                  const double err =
                      std::fabs(static_cast<double>(w[row * K + i]) - ref.weights[static_cast<size_t>(i)]);
                  max_w_err = std::max(max_w_err, err);
                  if (id != ref.ids[static_cast<size_t>(i)] || !(err <= 2e-7)) ok_ref = false;
                  if (id != cids[i] || !(std::fabs(w[row * K + i] - cw[i]) <= 2e-7f)) ok_cpu = false;
                }
                if (!ok_ref && ++ref_fail <= 5)
                  std::fprintf(
                      stderr,
                      "metal router vs reference: E=%d b=%g r=%g prot=%d draft=%d row kind=%d trial=%d map=%d\n", E,
                      double(b), double(r), prot, draft, kind, trial, m);
                if (!ok_cpu) ++cpu_fail;
              }
              // r has no effect when r <= 1 or the row is a draft row with the flag on (r = 1 runs first).
              auto& r1_ids = pass == 0 ? ids_r1_with : ids_r1_none;
              auto& r1_w = pass == 0 ? w_r1_with : w_r1_none;
              if (ri == 0) {
                r1_ids.assign(ids, ids + bt.rows * K);
                r1_w.assign(w, w + bt.rows * K);
                continue;
              }
              const int per_kind = pass == 0 ? 36 : 12;
              for (int row = 0; row < bt.rows; ++row) {
                const bool draft_row = row / per_kind == 1;
                if (!(r <= 1.0f || (draft != 0 && draft_row))) continue;
                for (int i = row * K; i < (row + 1) * K; ++i)
                  if (ids[i] != r1_ids[static_cast<size_t>(i)] || w[i] != r1_w[static_cast<size_t>(i)]) ++r_effect_fail;
              }
            }
          }
        }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "metal router grid (emulated): %ld cases in %.1f s; reference mismatches %ld, CPU mismatches %ld, "
      "r-effect violations %ld, status failures %ld; max weight error %.3g; %llu dispatches\n",
      cases, secs, ref_fail, cpu_fail, r_effect_fail, status_fail, max_w_err,
      static_cast<unsigned long long>(dev.encoder().dispatches()));
  CHECK_EQ(cases, 158400L);
  CHECK_EQ(ref_fail, 0L);
  CHECK_EQ(cpu_fail, 0L);
  CHECK_EQ(r_effect_fail, 0L);
  CHECK_EQ(status_fail, 0L);
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(fused_softmax_matches_cpu_softmax_then_route_row) {
  EmuDevice dev;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 2.0f);
  for (int E : {8, 33, 512, 1024}) {
    const int rows = 9, k = std::min(E, 10);
    auto x = dev.new_buffer(static_cast<size_t>(rows) * E * 4);
    auto res = dev.new_buffer(static_cast<size_t>(E));
    auto ids = dev.new_buffer(static_cast<size_t>(rows) * k * 4);
    auto w = dev.new_buffer(static_cast<size_t>(rows) * k * 4);
    auto st = dev.new_buffer(static_cast<size_t>(rows) * 4);
    float* xs = static_cast<float*>(x->contents());
    for (int i = 0; i < rows * E; ++i) xs[i] = g(rng);
    uint8_t* rm = static_cast<uint8_t*>(res->contents());
    for (int e = 0; e < E; ++e) rm[e] = (rng() % 3) == 0;
    RouteArgs a = args(rows, E, 2.0f, 3.0f, 3, true, 1, true);
    a.k = static_cast<uint32_t>(k);
    a.softmax = 1;
    a.resident_stride = 0;  // one map for every row
    strata::mtl::encode_route(dev, a, BufferRef{x.get()}, BufferRef{res.get()}, BufferRef{ids.get()},
                              BufferRef{w.get()}, BufferRef{st.get()});
    dev.submit();
    for (int r = 0; r < rows; ++r) {
      std::vector<float> p(xs + r * E, xs + (r + 1) * E);
      strata::engine::softmax(p.data(), E);
      int32_t cids[64];
      float cw[64];
      strata::routing::MoceParams mp;
      mp.resident_bonus = 2.0f;
      mp.rank1_scale = 3.0f;
      mp.protect = 3;
      mp.draft = true;
      strata::routing::route_row(p.data(), E, k, rm, mp, r >= 1, cids, cw);
      CHECK_EQ(static_cast<const int*>(st->contents())[r], 0);
      for (int i = 0; i < k; ++i) {
        CHECK_EQ(static_cast<const int*>(ids->contents())[r * k + i], cids[i]);
        CHECK_NEAR(static_cast<const float*>(w->contents())[r * k + i], cw[i], 2e-7);
      }
    }
  }
}

TEST(nan_rows_set_the_status_and_bad_shapes_are_refused) {
  EmuDevice dev;
  const int E = 16, rows = 2;
  auto x = dev.new_buffer(rows * E * 4);
  auto ids = dev.new_buffer(rows * 4 * 4);
  auto w = dev.new_buffer(rows * 4 * 4);
  auto st = dev.new_buffer(rows * 4);
  float* xs = static_cast<float*>(x->contents());
  for (int i = 0; i < rows * E; ++i) xs[i] = 1.0f / E;
  for (int e = 0; e < E; ++e)
    if (e != 3) xs[E + e] = std::nanf("");  // row 1: one candidate for k = 4
  RouteArgs a = args(rows, E, 1.0f, 1.0f, 0, false, -1, false);
  a.k = 4;
  strata::mtl::encode_route(dev, a, BufferRef{x.get()}, BufferRef{x.get()}, BufferRef{ids.get()}, BufferRef{w.get()},
                            BufferRef{st.get()});
  dev.submit();
  const int* s = static_cast<const int*>(st->contents());
  CHECK_EQ(s[0], 0);
  CHECK_EQ(s[1], 1);
  CHECK_EQ(static_cast<const int*>(ids->contents())[0], 0);  // uniform row: ties to the lowest ids
  CHECK_EQ(static_cast<const int*>(ids->contents())[3], 3);
  a.k = 65;
  a.n_experts = 2000;
  CHECK_THROWS(strata::mtl::encode_route(dev, a, BufferRef{x.get()}, BufferRef{x.get()}, BufferRef{ids.get()},
                                         BufferRef{w.get()}, BufferRef{st.get()}));
  a.n_experts = 16;
  a.k = 17;
  CHECK_THROWS(strata::mtl::encode_route(dev, a, BufferRef{x.get()}, BufferRef{x.get()}, BufferRef{ids.get()},
                                         BufferRef{w.get()}, BufferRef{st.get()}));
}
