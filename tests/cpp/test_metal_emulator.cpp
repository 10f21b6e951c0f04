// The threadgroup / SIMD-group emulator itself (metal/emu, R-7): real barriers, SIMD collectives with
// a fixed reduction tree, race / divergence / bounds detection, identical bits across runs.
#define STRATA_TEST_MAIN
#include "check.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "metal/emu/emulator.h"
#include "strata/engine/vec_dot.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

// Kernels below are written in the MSL subset, as the real ones are.
#include "metal/kernels/msl_compat.h"
#include "metal/kernels/common.h"

using strata::emu::Dim3;
using strata::emu::Emulator;
using strata::emu::Launch;
using strata::emu::ThreadPos;
using strata::emu::ViolationKind;

namespace {

bool has(const Emulator& e, ViolationKind k) {
  for (const auto& v : e.violations())
    if (v.kind == k) return true;
  return false;
}

// ---- a threadgroup tree reduction through threadgroup memory

struct ReduceCtx {
  const float* in;
  float* out;
  bool barrier_in_loop;
};

void reduce_kernel(const void* c, const ThreadPos& p) {
  const auto& a = *static_cast<const ReduceCtx*>(c);
  TGP(float) tg = strata::emu::threadgroup_arg<float>(0);
  const uint i = p.index, n = p.tg_size.x;
  tg[i] = a.in[p.tg_pos.x * n + i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = n / 2; s > 0; s /= 2) {
    if (i < s) tg[i] = tg[i] + tg[i + s];
    if (a.barrier_in_loop) threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (i == 0) a.out[p.tg_pos.x] = tg[0];
}

float tree_reference(const float* x, uint32_t n) {
  std::vector<float> v(x, x + n);
  for (uint32_t s = n / 2; s > 0; s /= 2)
    for (uint32_t i = 0; i < s; ++i) v[i] = v[i] + v[i + s];
  return v[0];
}

Launch reduce_launch(const ReduceCtx* ctx, uint32_t groups, uint32_t threads) {
  Launch l;
  l.fn = &reduce_kernel;
  l.ctx = ctx;
  l.grid = Dim3{groups, 1, 1};
  l.group = Dim3{threads, 1, 1};
  l.tg_bytes[0] = threads * 4;
  l.name = "reduce";
  return l;
}

// ---- SIMD collectives, one output slot per thread and operation

struct SimdCtx {
  const float* in;
  float* sum;
  float* max;
  float* shuffle;
  float* shuffle_xor;
  float* down;
  float* up;
  float* bcast;
  int* prefix;
  uint* ballot;
  int* any_all;
};

void simd_kernel(const void* c, const ThreadPos& p) {
  const auto& a = *static_cast<const SimdCtx*>(c);
  const uint g = p.tg_pos.x * p.tg_size.x + p.index;
  const float v = a.in[g];
  a.sum[g] = simd_sum(v);
  a.max[g] = simd_max(v);
  a.shuffle[g] = simd_shuffle(v, static_cast<ushort>((p.simd_lane + 5) % 32));
  a.shuffle_xor[g] = simd_shuffle_xor(v, static_cast<ushort>(3));
  a.down[g] = simd_shuffle_down(v, static_cast<ushort>(4));
  a.up[g] = simd_shuffle_up(v, static_cast<ushort>(6));
  a.bcast[g] = simd_broadcast(v, static_cast<ushort>(7));
  a.prefix[g] = simd_prefix_exclusive_sum(static_cast<int>(p.simd_lane) + 1);
  a.ballot[g] = static_cast<uint>(static_cast<uint64_t>(simd_ballot(v > 0.0f)));
  a.any_all[g] = (simd_any(p.simd_lane == 9) ? 1 : 0) + (simd_all(p.simd_lane < 40) ? 2 : 0);
}

float butterfly_sum(const float* v) {  // the documented fixed tree, written out
  float cur[32];
  for (int l = 0; l < 32; ++l) cur[l] = v[l];
  for (int off = 16; off >= 1; off /= 2) {
    float nxt[32];
    for (int l = 0; l < 32; ++l) nxt[l] = cur[l & ~off] + cur[l | off];
    for (int l = 0; l < 32; ++l) cur[l] = nxt[l];
  }
  return cur[0];
}

// ---- kernels with bugs the emulator must catch

void early_return_kernel(const void*, const ThreadPos& p) {
  if (p.index == 3) return;  // a thread leaves before a barrier the others wait at
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

void divergent_simd_kernel(const void* c, const ThreadPos& p) {
  float* out = static_cast<float*>(const_cast<void*>(c));
  if (p.simd_lane < 16)
    out[p.index] = simd_sum(1.0f);
  else
    out[p.index] = simd_max(1.0f);
}

void uninit_kernel(const void* c, const ThreadPos& p) {
  float* out = static_cast<float*>(const_cast<void*>(c));
  TGP(float) tg = strata::emu::threadgroup_arg<float>(0);
  if (p.index < 8) tg[p.index] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[p.index] = tg[p.index];  // threads 8.. read bytes nobody wrote
}

void oob_kernel(const void*, const ThreadPos& p) {
  TGP(float) tg = strata::emu::threadgroup_arg<float>(0);
  tg[p.index + 1] = 0.0f;  // the last thread writes one past the region
}

void nonuniform_kernel(const void* c, const ThreadPos& p) {
  float* out = static_cast<float*>(const_cast<void*>(c));
  out[p.index] = simd_shuffle_xor(1.0f, static_cast<ushort>(p.simd_lane & 1));
}

void inactive_lane_kernel(const void* c, const ThreadPos& p) {
  float* out = static_cast<float*>(const_cast<void*>(c));
  out[p.index] = simd_shuffle(static_cast<float>(p.index), static_cast<ushort>(20));  // group of 40: sg 1 has 8 lanes
}

struct SgBarrierCtx {
  float* out;
  bool cross_group;  // read a lane of another SIMD group (needs a threadgroup barrier)
};

void sg_barrier_kernel(const void* c, const ThreadPos& p) {
  const auto& a = *static_cast<const SgBarrierCtx*>(c);
  TGP(float) tg = strata::emu::threadgroup_arg<float>(0);
  tg[p.index] = static_cast<float>(p.index);
  simdgroup_barrier(mem_flags::mem_threadgroup);
  const uint src = a.cross_group ? (p.index + 32) % p.tg_size.x : (p.index / 32) * 32 + (p.simd_lane + 1) % 32;
  a.out[p.index] = tg[src];
}

struct PosCtx {
  uint* out;  // 6 values per thread
};

void pos_kernel(const void* c, const ThreadPos& p) {
  const auto& a = *static_cast<const PosCtx*>(c);
  const uint g = (p.tg_pos.z * p.grid_tgs.y + p.tg_pos.y) * p.grid_tgs.x + p.tg_pos.x;
  uint* o = a.out + (g * p.tg_size.x + p.index) * 6;
  o[0] = p.tg_pos.x;
  o[1] = p.tg_pos.y;
  o[2] = p.tg_pos.z;
  o[3] = p.index;
  o[4] = p.simd_group;
  o[5] = p.simd_lane;
}

void barrier_loop_kernel(const void* c, const ThreadPos& p) {
  float* out = static_cast<float*>(const_cast<void*>(c));
  TGP(float) tg = strata::emu::threadgroup_arg<float>(0);
  float acc = 0.0f;
  for (int it = 0; it < 8; ++it) {
    tg[p.index] = static_cast<float>(p.index + static_cast<uint>(it));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    acc += tg[(p.index + 1) % p.tg_size.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  out[p.tg_pos.x * p.tg_size.x + p.index] = acc;
}

}  // namespace

#include "metal/kernels/msl_compat_end.h"

TEST(reduction_with_barriers_is_exact) {
  const uint32_t groups = 5, n = 256;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> in(groups * n), out(groups, 0.0f);
  for (auto& x : in) x = u(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20));
  ReduceCtx ctx{in.data(), out.data(), true};
  Emulator emu;
  emu.dispatch(reduce_launch(&ctx, groups, n));
  CHECK_EQ(emu.violation_count(), uint64_t{0});
  for (uint32_t g = 0; g < groups; ++g)
    CHECK(std::bit_cast<uint32_t>(out[g]) == std::bit_cast<uint32_t>(tree_reference(&in[g * n], n)));
}

TEST(missing_barrier_is_a_detected_race_and_a_wrong_answer) {
  const uint32_t n = 128;
  std::vector<float> in(n), out(1);
  for (uint32_t i = 0; i < n; ++i) in[i] = static_cast<float>(i + 1);
  ReduceCtx ctx{in.data(), out.data(), false};
  {
    Emulator emu;  // default: throws on a violation
    CHECK_THROWS(emu.dispatch(reduce_launch(&ctx, 1, n)));
    CHECK(has(emu, ViolationKind::Race));
  }
  // Without throwing: reported, and in at least one run order the sum is wrong.
  bool wrong = false;
  for (bool reverse : {false, true}) {
    strata::emu::Options o;
    o.throw_on_violation = false;
    o.reverse_order = reverse;
    Emulator emu(o);
    emu.dispatch(reduce_launch(&ctx, 1, n));
    CHECK(emu.violation_count() > 0);
    CHECK(has(emu, ViolationKind::Race));
    if (out[0] != static_cast<float>(n * (n + 1) / 2)) wrong = true;
  }
  CHECK(wrong);
  // Race detection off: nothing reported (the detector is what finds it).
  strata::emu::Options o;
  o.throw_on_violation = false;
  o.detect_races = false;
  Emulator quiet(o);
  quiet.dispatch(reduce_launch(&ctx, 1, n));
  CHECK_EQ(quiet.violation_count(), uint64_t{0});
}

TEST(simd_collective_semantics) {
  const uint32_t n = 64, groups = 2, total = n * groups;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> in(total), sum(total), mx(total), sh(total), shx(total), dn(total), up(total), bc(total);
  std::vector<int> prefix(total), anyall(total);
  std::vector<uint> ballot(total);
  for (auto& x : in) x = u(rng);
  SimdCtx ctx{in.data(), sum.data(), mx.data(),     sh.data(),     shx.data(),   dn.data(),
              up.data(), bc.data(),  prefix.data(), ballot.data(), anyall.data()};
  Launch l;
  l.fn = &simd_kernel;
  l.ctx = &ctx;
  l.grid = Dim3{groups, 1, 1};
  l.group = Dim3{n, 1, 1};
  l.name = "simd";
  Emulator emu;
  emu.dispatch(l);
  for (uint32_t base = 0; base < total; base += 32) {
    const float* v = &in[base];
    float m = v[0];
    uint exp_ballot = 0;
    for (int l2 = 0; l2 < 32; ++l2) {
      m = std::max(m, v[l2]);
      if (v[l2] > 0.0f) exp_ballot |= 1u << l2;
    }
    const float s = butterfly_sum(v);
    int pre = 0;
    for (int l2 = 0; l2 < 32; ++l2) {
      const uint32_t g = base + static_cast<uint32_t>(l2);
      CHECK(std::bit_cast<uint32_t>(sum[g]) == std::bit_cast<uint32_t>(s));
      CHECK_EQ(mx[g], m);
      CHECK_EQ(sh[g], v[(l2 + 5) % 32]);
      CHECK_EQ(shx[g], v[l2 ^ 3]);
      CHECK_EQ(dn[g], l2 + 4 < 32 ? v[l2 + 4] : v[l2]);  // the upper lanes keep their own value
      CHECK_EQ(up[g], l2 >= 6 ? v[l2 - 6] : v[l2]);
      CHECK_EQ(bc[g], v[7]);
      CHECK_EQ(prefix[g], pre);
      pre += l2 + 1;
      CHECK_EQ(ballot[g], exp_ballot);
      CHECK_EQ(anyall[g], 3);
    }
  }
}

TEST(partial_simd_group_sums_only_its_lanes) {
  // 40 threads: SIMD group 1 has lanes 0..7 only.
  std::vector<float> in(40, 1.0f), sum(40), dummy(40);
  std::vector<int> prefix(40), anyall(40);
  std::vector<uint> ballot(40);
  SimdCtx ctx{in.data(),    sum.data(),   dummy.data(),  dummy.data(),  dummy.data(), dummy.data(),
              dummy.data(), dummy.data(), prefix.data(), ballot.data(), anyall.data()};
  for (int i = 0; i < 40; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i);
  Launch l;
  l.fn = &simd_kernel;
  l.ctx = &ctx;
  l.group = Dim3{40, 1, 1};
  l.name = "simd40";
  strata::emu::Options o;
  o.throw_on_violation = false;
  Emulator emu(o);
  emu.dispatch(l);
  CHECK_EQ(sum[35], static_cast<float>(32 + 33 + 34 + 35 + 36 + 37 + 38 + 39));
  CHECK_EQ(sum[0], static_cast<float>(31 * 32 / 2));
  // Group 1's lanes 8..31 do not exist: shuffles reading them are reported.
  CHECK(has(emu, ViolationKind::InactiveLane));
}

TEST(fixed_reduction_order_gives_identical_bits_across_runs) {
  const uint32_t n = 256, groups = 64;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> in(groups * n);
  for (auto& x : in) x = u(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
  std::vector<float> ref_sum(groups * n);
  std::vector<std::vector<float>> runs;
  strata::ThreadPool pool(2);
  int differs_from_sequential = 0;
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<float> sum(groups * n), mx(groups * n), sh(groups * n), shx(groups * n), dn(groups * n), up(groups * n),
        bc(groups * n);
    std::vector<int> prefix(groups * n), anyall(groups * n);
    std::vector<uint> ballot(groups * n);
    SimdCtx ctx{in.data(), sum.data(), mx.data(),     sh.data(),     shx.data(),   dn.data(),
                up.data(), bc.data(),  prefix.data(), ballot.data(), anyall.data()};
    strata::emu::Options o;
    o.reverse_order = mode == 1;
    o.pool = mode == 2 ? &pool : nullptr;
    Emulator emu(o);
    Launch l;
    l.fn = &simd_kernel;
    l.ctx = &ctx;
    l.grid = Dim3{groups, 1, 1};
    l.group = Dim3{n, 1, 1};
    emu.dispatch(l);
    runs.push_back(sum);
  }
  for (uint32_t i = 0; i < groups * n; ++i) {
    CHECK(std::bit_cast<uint32_t>(runs[0][i]) == std::bit_cast<uint32_t>(runs[1][i]));
    CHECK(std::bit_cast<uint32_t>(runs[0][i]) == std::bit_cast<uint32_t>(runs[2][i]));
  }
  for (uint32_t base = 0; base < groups * n; base += 32) {
    float seq = 0.0f;
    for (int l2 = 0; l2 < 32; ++l2) seq += in[base + static_cast<uint32_t>(l2)];
    if (seq != runs[0][base]) ++differs_from_sequential;
    CHECK(std::bit_cast<uint32_t>(butterfly_sum(&in[base])) == std::bit_cast<uint32_t>(runs[0][base]));
  }
  std::printf("fixed tree vs sequential lane order: %d of %u SIMD groups differ in the last bits\n",
              differs_from_sequential, groups * n / 32);
  CHECK(differs_from_sequential > 0);  // the order is a real choice, and the emulator fixes it
}

TEST(barrier_divergence_is_reported_not_a_hang) {
  Launch l;
  l.fn = &early_return_kernel;
  l.group = Dim3{64, 1, 1};
  l.grid = Dim3{2, 1, 1};
  l.name = "early_return";
  strata::emu::Options o;
  o.throw_on_violation = false;
  Emulator emu(o);
  emu.dispatch(l);
  CHECK(has(emu, ViolationKind::BarrierDivergence));
  Emulator thrower;
  CHECK_THROWS(thrower.dispatch(l));
}

TEST(simd_divergence_is_reported) {
  std::vector<float> out(64);
  Launch l;
  l.fn = &divergent_simd_kernel;
  l.ctx = out.data();
  l.group = Dim3{64, 1, 1};
  strata::emu::Options o;
  o.throw_on_violation = false;
  Emulator emu(o);
  emu.dispatch(l);
  CHECK(has(emu, ViolationKind::SimdDivergence));
}

TEST(uninitialised_and_out_of_bounds_threadgroup_accesses) {
  std::vector<float> out(32);
  strata::emu::Options o;
  o.throw_on_violation = false;
  {
    Launch l;
    l.fn = &uninit_kernel;
    l.ctx = out.data();
    l.group = Dim3{32, 1, 1};
    l.tg_bytes[0] = 32 * 4;
    Emulator emu(o);
    emu.dispatch(l);
    CHECK(has(emu, ViolationKind::UninitialisedRead));
    CHECK(std::isnan(out[20]));  // fresh threadgroup memory holds a NaN pattern
    CHECK_EQ(out[3], 1.0f);
  }
  {
    Launch l;
    l.fn = &oob_kernel;
    l.group = Dim3{32, 1, 1};
    l.tg_bytes[0] = 32 * 4;
    Emulator emu(o);
    emu.dispatch(l);
    CHECK(has(emu, ViolationKind::OutOfBounds));
  }
}

TEST(non_uniform_arguments_are_reported) {
  std::vector<float> out(32);
  Launch l;
  l.fn = &nonuniform_kernel;
  l.ctx = out.data();
  l.group = Dim3{32, 1, 1};
  strata::emu::Options o;
  o.throw_on_violation = false;
  Emulator emu(o);
  emu.dispatch(l);
  CHECK(has(emu, ViolationKind::NonUniformArgument));
  std::vector<float> out2(40);
  Launch l2;
  l2.fn = &inactive_lane_kernel;
  l2.ctx = out2.data();
  l2.group = Dim3{40, 1, 1};
  Emulator emu2(o);
  emu2.dispatch(l2);
  CHECK(has(emu2, ViolationKind::InactiveLane));
  CHECK_EQ(out2[5], 20.0f);
}

TEST(simdgroup_barrier_orders_only_its_own_group) {
  std::vector<float> out(64);
  SgBarrierCtx within{out.data(), false};
  Launch l;
  l.fn = &sg_barrier_kernel;
  l.ctx = &within;
  l.group = Dim3{64, 1, 1};
  l.tg_bytes[0] = 64 * 4;
  Emulator emu;
  emu.dispatch(l);  // lanes of one SIMD group after a simdgroup_barrier: ordered, no violation
  CHECK_EQ(out[0], 1.0f);
  CHECK_EQ(out[63], 32.0f);
  SgBarrierCtx across{out.data(), true};
  l.ctx = &across;
  strata::emu::Options o;
  o.throw_on_violation = false;
  Emulator emu2(o);
  emu2.dispatch(l);
  CHECK(has(emu2, ViolationKind::Race));  // another SIMD group's write is not ordered by it
}

TEST(grid_and_thread_positions) {
  const Dim3 grid{3, 2, 2}, group{48, 1, 1};
  std::vector<uint> out(grid.count() * group.count() * 6);
  PosCtx ctx{out.data()};
  Launch l;
  l.fn = &pos_kernel;
  l.ctx = &ctx;
  l.grid = grid;
  l.group = group;
  Emulator emu;
  emu.dispatch(l);
  size_t k = 0;
  for (uint z = 0; z < 2; ++z)
    for (uint y = 0; y < 2; ++y)
      for (uint x = 0; x < 3; ++x)
        for (uint i = 0; i < 48; ++i, k += 6) {
          CHECK_EQ(out[k], x);
          CHECK_EQ(out[k + 1], y);
          CHECK_EQ(out[k + 2], z);
          CHECK_EQ(out[k + 3], i);
          CHECK_EQ(out[k + 4], i / 32);
          CHECK_EQ(out[k + 5], i % 32);
        }
}

TEST(bad_launches_are_rejected) {
  Launch l;
  l.fn = &early_return_kernel;
  l.group = Dim3{2048, 1, 1};
  Emulator emu;
  CHECK_THROWS(emu.dispatch(l));
  l.group = Dim3{32, 1, 1};
  l.tg_bytes[0] = 40000;
  CHECK_THROWS(emu.dispatch(l));
  Launch none;
  CHECK_THROWS(emu.dispatch(none));
}

TEST(speed_of_barriers) {
  // Measures (never gates): 16 groups of 1024 threads through 16 barriers each.
  const uint32_t n = 1024, groups = 16;
  std::vector<float> out(n * groups);
  Launch l;
  l.fn = &barrier_loop_kernel;
  l.ctx = out.data();
  l.grid = Dim3{groups, 1, 1};
  l.group = Dim3{n, 1, 1};
  l.tg_bytes[0] = n * 4;
  Emulator emu;
  const auto t0 = std::chrono::steady_clock::now();
  emu.dispatch(l);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("emulator: %llu fiber switches in %.3f s (%.0f ns each, including the kernel's work)\n",
              static_cast<unsigned long long>(emu.switches()), s, s * 1e9 / static_cast<double>(emu.switches()));
  float expect = 0.0f;
  for (int it = 0; it < 8; ++it) expect += static_cast<float>(1 + it);
  CHECK_EQ(out[0], expect);
  CHECK(emu.switches() >= uint64_t{n} * groups * 16);  // every thread is resumed after every barrier
}

TEST(exp_cpu_is_the_engines_exp_f32) {
  // The kernels' softmax exp (metal/kernels/common.h) restates engine::exp_f32 in the MSL subset; the
  // attention's CPU / Metal byte identity rests on the two being the same function bit for bit.
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-95.0f, 95.0f);
  int differ = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = i < 1000 ? -0.001f * static_cast<float>(i) : u(g);
    const float a = exp_cpu(x), b = strata::engine::exp_f32(x);
    differ += std::memcmp(&a, &b, sizeof a) != 0;
  }
  for (const float x : {0.0f, -0.0f, -87.0f, -87.0001f, 88.0f, 88.0001f, -INFINITY, INFINITY}) {
    const float a = exp_cpu(x), b = strata::engine::exp_f32(x);
    differ += std::memcmp(&a, &b, sizeof a) != 0;
  }
  CHECK_EQ(differ, 0);
  CHECK(std::isnan(exp_cpu(NAN)));
}
