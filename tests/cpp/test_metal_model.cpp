// Whole models through the Metal kernels on the emulator (STRATA_BACKEND=metal-emu's path): greedy
// tokens of tiny strata models equal the CPU backend's, for every feature combination the tiny
// builder offers (4 streams, gated attention, sinks + window + lightning indexer, shared expert;
// and all of them off with full causal attention), with F32 and F16 weights, prompts that stream in
// several chunks, and the device reversing the dispatches between barriers (a missing barrier in
// the dispatch plan would change the answer); and a tiny qwen3moe model (f32 K/V cells). Logits
// agree to float rounding.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/metal_model.h"
#include "strata/engine/runner.h"
#include "strata/util/thread_pool.h"
#include "test_engine_support.h"

using strata_test::TinyOptions;

namespace {

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

struct Result {
  std::vector<int32_t> cpu, metal;
  double max_logit_diff = 0.0, min_margin = 1e30;
};

// Prompt, then greedy decode one token at a time on both backends.
Result greedy_both(const TinyOptions& o, int prompt_len, int steps, int metal_rows) {
  Result res;
  strata::engine::RunnerConfig rc;
  rc.n_threads = 1;
  rc.max_ctx = 128;
  rc.max_rows = 16;
  rc.encode_mtp = false;
  strata::engine::Runner cpu(strata_test::tiny_model(o), rc);
  auto model = strata_test::tiny_model(o);
  strata::ThreadPool pool(2);
  strata::emu::Options eo;
  eo.pool = &pool;
  strata::mtl::EmuDevice dev(eo, /*reverse_between_barriers=*/true);
  strata::mtl::MetalModelConfig mc;
  mc.max_rows = metal_rows;
  mc.max_ctx = 128;
  const auto metal_seq = strata::mtl::metal_sequence(dev, *model, mc, {});
  strata::engine::Sequence& metal = *metal_seq;
  const int V = static_cast<int>(cpu.hparams().n_vocab);
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back((i * 17 + 5) % V);
  std::vector<float> lc(static_cast<size_t>(V)), lm(static_cast<size_t>(V));
  auto compare = [&](const std::vector<float>& a, const std::vector<float>& b) {
    for (int i = 0; i < V; ++i)
      res.max_logit_diff = std::max(res.max_logit_diff, std::fabs(static_cast<double>(a[size_t(i)]) - b[size_t(i)]));
    std::vector<float> s = a;
    std::sort(s.begin(), s.end(), std::greater<float>());
    res.min_margin = std::min(res.min_margin, static_cast<double>(s[0] - s[1]));
  };
  cpu.eval(prompt.data(), prompt_len, 0, strata::engine::LogitRows::Last, lc.data());
  metal.eval(prompt.data(), prompt_len, 0, lm.data());
  compare(lc, lm);
  int32_t tc = argmax(lc), tm = argmax(lm);
  for (int s = 0; s < steps; ++s) {
    res.cpu.push_back(tc);
    res.metal.push_back(tm);
    const int64_t pos = prompt_len + s;
    cpu.eval(&tc, 1, pos, strata::engine::LogitRows::Last, lc.data());
    metal.eval(&tm, 1, pos, lm.data());
    compare(lc, lm);
    tc = argmax(lc);
    tm = argmax(lm);
  }
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
  return res;
}

void check_case(const char* name, const TinyOptions& o, int prompt_len, int steps, int metal_rows) {
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = greedy_both(o, prompt_len, steps, metal_rows);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %d greedy tokens, CPU %s metal-emu; max |logit diff| %.3g (smallest top-2 margin %.3g); %.1f s\n",
              name, steps, r.cpu == r.metal ? "==" : "!=", r.max_logit_diff, r.min_margin, s);
  CHECK_MSG(r.cpu == r.metal, name);
  CHECK_MSG(r.max_logit_diff < 1e-3, name);
}

}  // namespace

TEST(every_feature_on_f32) {
  TinyOptions o;  // 4 streams, gated, sink 2 + window 5 + indexer top-3, shared expert
  o.seed = 3;
  check_case("strata tiny (all features, F32)", o, 11, 20, 4);
}

TEST(every_feature_on_f16_one_chunk_prompt) {
  TinyOptions o;
  o.seed = 5;
  o.matrix_type = strata::quant::GGMLType::F16;
  check_case("strata tiny (all features, F16)", o, 9, 16, 16);
}

TEST(features_off_full_causal_attention) {
  TinyOptions o;
  o.seed = 7;
  o.hc = 1;
  o.gated = false;
  o.idx_heads = 0;
  o.window = 0;
  o.sink = 0;
  o.ff_shared = 0;
  o.mtp = false;
  check_case("strata tiny (n = 1, ungated, full causal, no shared expert)", o, 7, 16, 3);
}

TEST(qwen3moe_f32_cells) {
  // llama.cpp's qwen3moe: n = 1, ungated, full causal attention, no shared expert, no MTP, f32 K/V
  // cells (the _f32 attention kernels); a prompt in several chunks.
  TinyOptions o;
  o.seed = 13;
  o.qwen3moe = true;
  check_case("qwen3moe tiny (f32 K/V cells)", o, 10, 16, 4);
}

TEST(bad_calls_are_refused) {
  TinyOptions o;
  auto model = strata_test::tiny_model(o);
  strata::mtl::EmuDevice dev;
  strata::mtl::MetalModelConfig mc;
  mc.max_ctx = 16;
  const auto metal_seq = strata::mtl::metal_sequence(dev, *model, mc, {});
  strata::engine::Sequence& metal = *metal_seq;
  const int32_t bad_token = 1000, ok = 3;
  CHECK_THROWS(metal.eval(&bad_token, 1, 0, nullptr));
  CHECK_THROWS(metal.eval(&ok, 1, 1, nullptr));   // start past n_past
  CHECK_THROWS(metal.eval(&ok, 1, 16, nullptr));  // past max_ctx
  metal.eval(&ok, 1, 0, nullptr);
  CHECK_EQ(metal.n_past(), int64_t{1});
}

TEST(mtp_drafts_equal_cpu) {
  // The drafter on the Metal kernels: cells encoded during eval (K/V-only rows), chained draft steps
  // over its own sink + window cells (the fused attention), the restricted head — draft tokens equal
  // the CPU Runner's over several decode rounds, draft logits to float rounding.
  TinyOptions o;
  o.seed = 11;
  strata::engine::RunnerConfig rc;
  rc.n_threads = 1;
  rc.max_ctx = 96;
  rc.max_rows = 16;
  rc.mtp_sink = 2;
  rc.mtp_window = 6;  // both read DraftCells' lists: sink ∪ [p - W, p]
  strata::engine::Runner cpu(strata_test::tiny_model(o), rc);
  auto model = strata_test::tiny_model(o);
  strata::mtl::EmuDevice dev({}, /*reverse_between_barriers=*/true);
  strata::mtl::MetalModelConfig mc;
  mc.max_rows = 5;
  mc.max_ctx = 96;
  strata::engine::SequenceConfig sc;
  sc.mtp_sink = 2;
  sc.mtp_window = 6;
  const auto metal_seq = strata::mtl::metal_sequence(dev, *model, mc, sc);
  strata::engine::Sequence& metal = *metal_seq;
  CHECK(metal.has_mtp());
  const int V = static_cast<int>(cpu.hparams().n_vocab), Vr = static_cast<int>(cpu.hparams().mtp_vocab);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back((i * 13 + 4) % V);
  std::vector<float> lc(static_cast<size_t>(V)), lm(static_cast<size_t>(V));
  cpu.eval(prompt.data(), 12, 0, strata::engine::LogitRows::Last, lc.data());
  metal.eval(prompt.data(), 12, 0, lm.data());
  int64_t pos = 12;
  double worst = 0.0;
  int rounds = 0, drafted = 0;
  for (int round = 0; round < 5; ++round) {
    const int32_t tc = argmax(lc), tm = argmax(lm);
    CHECK_EQ(tc, tm);
    const int steps = 3;
    std::vector<int32_t> dc(static_cast<size_t>(steps)), dm(static_cast<size_t>(steps));
    std::vector<float> lgc(static_cast<size_t>(steps * Vr)), lgm(static_cast<size_t>(steps * Vr));
    cpu.mtp_draft(nullptr, tc, pos - 1, steps, lgc.data(), dc.data());
    metal.mtp_draft(nullptr, tm, pos - 1, steps, lgm.data(), dm.data());
    CHECK(dc == dm);
    for (size_t i = 0; i < lgc.size(); ++i) worst = std::max(worst, std::fabs(double(lgc[i]) - lgm[i]));
    drafted += steps;
    // Accept the first draft as if verified, then continue decoding from it.
    const int32_t step[2] = {tc, dc[0]};
    cpu.eval(step, 2, pos, strata::engine::LogitRows::Last, lc.data());
    metal.eval(step, 2, pos, lm.data());
    pos += 2;
    ++rounds;
  }
  std::printf(
      "MTP drafts through metal-emu: %d rounds, %d draft tokens equal to the CPU's; max |draft logit diff| %.3g\n",
      rounds, drafted, worst);
  CHECK(worst < 1e-3);
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}
