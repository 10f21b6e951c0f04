// deepseek4 on a tiny random model held in memory (its logits against transformers are
// tests/python/test_deepseek4_engine.py): no allocation on the per-token path across every layer
// type (sliding, CSA with the indexer picking, HCA with a window closing), chunking invariance bit
// for bit, and the hyper-parameter checks naming their key.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
#define STRATA_TEST_MAIN
#include "check.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "strata/engine/runner.h"
#include "strata/engine/window.h"
#include "strata/routing/ds4_scoring.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"
#include "test_engine_support.h"

#include "alloc_counter.h"

using strata::engine::LogitRows;
using strata::engine::Window;
using strata::engine::WindowConfig;
using strata_test::MemorySource;
using strata_test::randn;

namespace {

constexpr int kD = 32, kHeads = 2, kHeadDim = 16, kRope = 8, kQLora = 12, kGroups = 2, kOLora = 8;
constexpr int kIdxHeads = 2, kIdxDim = 8, kExperts = 4, kUsed = 2, kFf = 8, kVocab = 40, kHc = 4;
const std::vector<uint32_t> kRatios = {0, 4, 128};  // sliding, CSA, HCA

// A tiny deepseek4 with every layer type; layer 0 is hash-routed. mtp: llama.cpp's separate MTP
// file of that model instead (one block more, a sliding one, with its nextn.* tensors).
std::unique_ptr<MemorySource> ds4_source(bool mtp = false) {
  auto src = std::make_unique<MemorySource>();
  std::mt19937 g(7);
  std::vector<uint32_t> ratios = kRatios;
  if (mtp) ratios.push_back(0);
  const int64_t d = kD, L = static_cast<int64_t>(ratios.size());
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    src->add_f32(name, {rows, cols}, randn(g, static_cast<std::size_t>(rows * cols), 1.0f / std::sqrt(float(cols))));
  };
  auto vec = [&](const std::string& name, std::vector<int64_t> dims, float base, float scale) {
    std::size_t n = 1;
    for (auto x : dims) n *= static_cast<std::size_t>(x);
    auto v = randn(g, n, scale);
    for (auto& x : v) x += base;
    src->add_f32(name, dims, v);
  };
  const std::string a = "deepseek4.";
  src->set_s("general.architecture", "deepseek4");
  src->set_u(a + "context_length", 4096);
  src->set_u(a + "embedding_length", d);
  src->set_u(a + "block_count", static_cast<uint64_t>(L));
  src->set_u(a + "attention.head_count", kHeads);
  src->set_u(a + "attention.head_count_kv", 1);
  src->set_u(a + "attention.key_length", kHeadDim);
  src->set_u(a + "attention.value_length", kHeadDim);
  src->set_f(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  src->set_f(a + "rope.freq_base", 10000.0f);
  src->set_u(a + "rope.dimension_count", kRope);
  src->set_u(a + "attention.q_lora_rank", kQLora);
  src->set_u(a + "attention.sliding_window", 6);
  src->set_u(a + "attention.output_group_count", kGroups);
  src->set_u(a + "attention.output_lora_rank", kOLora);
  src->set_u32_array(a + "attention.compress_ratios", ratios);
  if (mtp) src->set_u(a + "nextn_predict_layers", 1);
  src->set_f(a + "attention.compress_rope_freq_base", 160000.0f);
  src->set_u(a + "attention.indexer.head_count", kIdxHeads);
  src->set_u(a + "attention.indexer.key_length", kIdxDim);
  src->set_u(a + "attention.indexer.top_k", 2);
  src->set_u(a + "expert_count", kExperts);
  src->set_u(a + "expert_used_count", kUsed);
  src->set_u(a + "expert_feed_forward_length", kFf);
  src->set_u(a + "expert_shared_count", 1);
  src->set_u(a + "expert_gating_func", 4);
  src->set_f(a + "expert_weights_scale", 1.5f);
  src->set_u(a + "hash_layer_count", 1);
  src->set_f32_array(a + "swiglu_clamp_exp", std::vector<float>(ratios.size(), 0.8f));
  src->set_f32_array(a + "swiglu_clamp_shexp", std::vector<float>(ratios.size(), 0.8f));
  src->set_u(a + "hyper_connection.count", kHc);
  src->set_u(a + "hyper_connection.sinkhorn_iterations", 5);
  src->set_f(a + "hyper_connection.epsilon", 1e-6f);
  mat("token_embd.weight", kVocab, d);
  mat("output.weight", kVocab, d);
  vec("output_norm.weight", {d}, 1.0f, 0.1f);
  vec("output_hc_fn.weight", {kHc, kHc * d}, 0.0f, 0.5f);
  vec("output_hc_base.weight", {kHc}, 0.0f, 0.5f);
  vec("output_hc_scale.weight", {1}, 0.0f, 0.5f);
  auto compressor = [&](const std::string& p, int64_t ratio, int64_t dim) {
    const int64_t width = (ratio == 4 ? 2 : 1) * dim;
    mat(p + "_kv.weight", width, d);
    mat(p + "_gate.weight", width, d);
    vec(p + "_ape.weight", {ratio, width}, 0.0f, 0.3f);
    vec(p + "_norm.weight", {dim}, 1.0f, 0.1f);
  };
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t ratio = ratios[static_cast<std::size_t>(l)];
    vec(p + "attn_norm.weight", {d}, 1.0f, 0.1f);
    vec(p + "attn_sinks.weight", {kHeads}, 0.0f, 0.3f);
    mat(p + "attn_q_a.weight", kQLora, d);
    vec(p + "attn_q_a_norm.weight", {kQLora}, 1.0f, 0.1f);
    mat(p + "attn_q_b.weight", kHeads * kHeadDim, kQLora);
    mat(p + "attn_kv.weight", kHeadDim, d);
    vec(p + "attn_kv_a_norm.weight", {kHeadDim}, 1.0f, 0.1f);
    mat(p + "attn_output_a.weight", kGroups * kOLora, kHeads * kHeadDim / kGroups);
    mat(p + "attn_output_b.weight", d, kGroups * kOLora);
    if (ratio > 0) compressor(p + "attn_compressor", ratio, kHeadDim);
    if (ratio == 4) {
      mat(p + "indexer.proj.weight", kIdxHeads, d);
      mat(p + "indexer.attn_q_b.weight", kIdxHeads * kIdxDim, kQLora);
      compressor(p + "indexer_compressor", 4, kIdxDim);
    }
    for (const char* hc : {"hc_attn", "hc_ffn"}) {
      vec(p + hc + "_fn.weight", {(2 + kHc) * kHc, kHc * d}, 0.0f, 0.5f);
      vec(p + hc + "_base.weight", {(2 + kHc) * kHc}, 0.0f, 0.5f);
      vec(p + hc + "_scale.weight", {3}, 0.0f, 0.5f);
    }
    vec(p + "ffn_norm.weight", {d}, 1.0f, 0.1f);
    mat(p + "ffn_gate_inp.weight", kExperts, d);
    if (l == 0) {
      std::vector<int32_t> table(static_cast<std::size_t>(kVocab * kUsed));
      for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 3 + i / kUsed) % kExperts);
      for (std::size_t t = 0; t < static_cast<std::size_t>(kVocab); ++t)
        if (table[2 * t] == table[2 * t + 1]) table[2 * t + 1] = (table[2 * t] + 1) % kExperts;
      src->add_i32(p + "ffn_gate_tid2eid.weight", {kVocab, kUsed}, table);
    } else {
      vec(p + "exp_probs_b.bias", {kExperts}, 0.0f, 0.3f);
    }
    src->add_f32(p + "ffn_gate_exps.weight", {kExperts, kFf, d}, randn(g, kExperts * kFf * d, 0.2f));
    src->add_f32(p + "ffn_up_exps.weight", {kExperts, kFf, d}, randn(g, kExperts * kFf * d, 0.2f));
    src->add_f32(p + "ffn_down_exps.weight", {kExperts, d, kFf}, randn(g, kExperts * kFf * d, 0.3f));
    mat(p + "ffn_gate_shexp.weight", kFf, d);
    mat(p + "ffn_up_shexp.weight", kFf, d);
    mat(p + "ffn_down_shexp.weight", d, kFf);
  }
  if (mtp) {
    const std::string p = "blk." + std::to_string(L - 1) + ".nextn.";
    mat(p + "eh_proj.weight", d, 2 * d);
    for (const char* n : {"enorm", "hnorm", "shared_head_norm"}) vec(p + n + ".weight", {d}, 1.0f, 0.1f);
  }
  return src;
}

std::vector<int32_t> tokens(int n) {
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = (i * 17 + 5) % kVocab;
  return t;
}

WindowConfig config(strata::ThreadPool* pool) {
  WindowConfig wc;
  wc.max_ctx = 200;
  wc.max_rows = 64;
  wc.pool = pool;
  return wc;
}

std::string error_of(MemorySource* edited) {
  try {
    strata::model::Model::from_source(std::unique_ptr<MemorySource>(edited));
  } catch (const strata::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(decode_and_chunks_do_not_allocate) {
  strata::ThreadPool pool(2);
  auto model = strata::model::Model::from_source(ds4_source());
  Window w(*model, config(&pool));
  auto toks = tokens(160);
  w.run(toks.data(), 60, 0, LogitRows::Last);
  w.run(toks.data() + 60, 1, 60, LogitRows::Last);  // warm every path once
  const long before = g_allocs.load();
  for (int p = 61; p < 100; ++p) w.run(toks.data() + p, 1, p, LogitRows::Last);
  w.run(toks.data() + 100, 40, 100, LogitRows::All);  // closes the HCA window at 127
  for (int p = 140; p < 150; ++p) w.run(toks.data() + p, 1, p, LogitRows::Last);
  CHECK_EQ(g_allocs.load() - before, 0L);
}

TEST(any_chunking_gives_the_same_logits_bit_for_bit) {
  strata::ThreadPool pool(2);
  auto model = strata::model::Model::from_source(ds4_source());
  auto toks = tokens(150);
  const int V = kVocab;
  Window one(*model, config(&pool));
  std::vector<float> want;
  for (int at = 0; at < 150; at += 50) {  // 50-row chunks, all logits
    one.run(toks.data() + at, 50, at, LogitRows::All);
    for (int r = 0; r < 50; ++r) want.insert(want.end(), one.logits(r), one.logits(r) + V);
  }
  Window many(*model, config(&pool));
  const int sizes[] = {1, 3, 64, 7, 2, 61, 12};
  int at = 0;
  for (int i = 0; at < 150; ++i) {
    const int n = std::min(sizes[i % 7], 150 - at);
    many.run(toks.data() + at, n, at, LogitRows::All);
    for (int r = 0; r < n; ++r)
      CHECK(std::memcmp(many.logits(r), want.data() + static_cast<std::size_t>(at + r) * V, sizeof(float) * V) == 0);
    at += n;
  }
}

TEST(hparams_errors_name_their_key) {
  {
    auto s = ds4_source();
    s->set_u("deepseek4.hash_layer_count", 4);
    CHECK(error_of(s.release()).find("deepseek4.hash_layer_count = 4 exceeds the 3 main layers") != std::string::npos);
  }
  {
    auto s = ds4_source();
    s->set_u("deepseek4.expert_gating_func", 2);
    CHECK(error_of(s.release()).find("deepseek4.expert_gating_func = 2") != std::string::npos);
  }
  {
    auto s = ds4_source();
    s->set_u("deepseek4.attention.output_group_count", 3);
    CHECK(error_of(s.release()).find("deepseek4.attention.output_group_count = 3") != std::string::npos);
  }
  {
    auto s = ds4_source();
    s->set_f32_array("deepseek4.swiglu_clamp_exp", {0.8f, 0.8f});
    CHECK(error_of(s.release()).find("deepseek4.swiglu_clamp_exp has 2 entries") != std::string::npos);
  }
  {
    auto s = ds4_source();
    s->erase("deepseek4.attention.compress_ratios");
    CHECK(error_of(s.release()).find("deepseek4.attention.compress_ratios is missing") != std::string::npos);
  }
  {
    auto s = ds4_source();
    s->erase("blk.1.indexer.proj.weight");
    CHECK(error_of(s.release()).find("blk.1.indexer.proj.weight is missing") != std::string::npos);
  }
  {
    auto s = ds4_source();
    s->set_u("deepseek4.attention.head_count_kv", 2);
    CHECK(error_of(s.release()).find("head_count_kv = 2") != std::string::npos);
  }
}

TEST(huge_window_and_top_k_cost_no_memory) {
  // A window and a top-k far beyond the context attend to everything and size nothing by their value.
  auto src = ds4_source();
  src->set_u("deepseek4.attention.sliding_window", 4000000000u);
  src->set_u("deepseek4.attention.indexer.top_k", 4000000000u);
  auto model = strata::model::Model::from_source(std::move(src));
  strata::ThreadPool pool(1);
  Window w(*model, config(&pool));
  auto toks = tokens(40);
  w.run(toks.data(), 40, 0, LogitRows::All);
  for (int r = 0; r < 40; ++r) CHECK(std::isfinite(w.logits(r)[0]));
}

TEST(a_file_with_an_mtp_block_runs_its_main_model) {
  // nextn_predict_layers = 1: block 3 is the MTP block (its per-block keys have 4 entries); it is
  // not bound, the three main layers run exactly as without it.
  auto src = ds4_source();
  src->set_u("deepseek4.block_count", 4);
  src->set_u("deepseek4.nextn_predict_layers", 1);
  src->set_u32_array("deepseek4.attention.compress_ratios", {0, 4, 128, 0});
  src->set_f32_array("deepseek4.swiglu_clamp_exp", std::vector<float>(4, 0.8f));
  src->set_f32_array("deepseek4.swiglu_clamp_shexp", std::vector<float>(4, 0.8f));
  auto with_mtp = strata::model::Model::from_source(std::move(src));
  CHECK_EQ(with_mtp->hparams().n_layer, 3u);
  CHECK(!with_mtp->mtp.has_value());
  auto plain = strata::model::Model::from_source(ds4_source());
  strata::ThreadPool pool(1);
  Window a(*with_mtp, config(&pool)), b(*plain, config(&pool));
  auto toks = tokens(20);
  a.run(toks.data(), 20, 0, LogitRows::Last);
  b.run(toks.data(), 20, 0, LogitRows::Last);
  CHECK(std::memcmp(a.logits(0), b.logits(0), sizeof(float) * kVocab) == 0);
}

TEST(mtp_file_binds_as_the_drafter_and_rounds_do_not_allocate) {
  auto model = strata::model::Model::from_source(ds4_source());
  model->attach_mtp_source(ds4_source(true));
  CHECK(model->mtp.has_value() && model->ds4_mtp.has_value());
  CHECK_EQ(model->ds4_mtp->attn.ratio, 0);
  CHECK_EQ(model->hparams().mtp_vocab, static_cast<uint32_t>(kVocab));
  strata::engine::RunnerConfig rc;
  rc.n_threads = 2;
  rc.max_ctx = 64;
  rc.max_rows = 16;
  rc.mtp_sink = 0;
  rc.mtp_window = 5;  // the drafter's list covers the sliding window of 6
  strata::engine::Runner run(std::move(model), rc);
  CHECK(run.has_mtp());
  auto toks = tokens(40);
  std::vector<float> logits(static_cast<std::size_t>(kVocab) * 4);
  int32_t drafts[3];
  run.eval(toks.data(), 10, 0, LogitRows::Last, logits.data());
  auto round = [&](int32_t t) {  // draft 3, verify, keep 2 (the third is rolled back)
    run.mtp_draft(nullptr, t, run.n_past() - 1, 3, nullptr, drafts);
    for (int32_t x : drafts) CHECK(x >= 0 && x < kVocab);
    const int32_t win[4] = {t, drafts[0], drafts[1], drafts[2]};
    const int64_t base = run.n_past();
    run.eval(win, 4, base, LogitRows::All, logits.data());
    run.commit(base + 2);
  };
  round(toks[10]);
  const long before = g_allocs.load();
  for (int i = 0; i < 8; ++i) round(toks[static_cast<std::size_t>(11 + i)]);  // past the window
  CHECK_EQ(g_allocs.load() - before, 0L);
}

TEST(a_wrong_mtp_file_is_refused) {
  auto model = strata::model::Model::from_source(ds4_source());
  std::string what;
  try {
    model->attach_mtp_source(ds4_source());  // the main file itself
  } catch (const strata::Error& e) {
    what = e.what();
  }
  CHECK(what.find("not this model's MTP file: deepseek4.nextn_predict_layers = 0") != std::string::npos);
  auto short_mtp = ds4_source(true);
  short_mtp->set_u("deepseek4.embedding_length", kD * 2);
  what.clear();
  try {
    model->attach_mtp_source(std::move(short_mtp));
  } catch (const strata::Error& e) {
    what = e.what();
  }
  CHECK(!what.empty());
  CHECK(!model->mtp.has_value());
}

TEST(sqrt_softplus_scores_and_hash_rows_ignore_moce) {
  float logits[4] = {0.5f, -1.0f, 2.0f, 0.1f};
  const float bias[4] = {0.0f, 3.0f, 0.0f, 0.0f};
  float s[4];
  for (int e = 0; e < 4; ++e) s[e] = std::sqrt(std::log1p(std::exp(logits[e])));
  float sel[4], w[2];
  int32_t ids[2];
  const strata::routing::SigmoidRouting sr{bias, true, 1.5f};
  const uint8_t resident[4] = {0, 0, 0, 1};
  strata::routing::MoceParams strong;
  strong.resident_bonus = 100.0f;
  // Routed: the bias picks expert 1 first, then expert 2 (highest score); weights renormalised and scaled.
  float routed[4] = {logits[0], logits[1], logits[2], logits[3]};
  strata::routing::sqrt_softplus_route_row(routed, sel, 4, 2, sr, nullptr, nullptr, {}, false, ids, w);
  CHECK_EQ(ids[0], 1);
  CHECK_EQ(ids[1], 2);
  CHECK_NEAR(w[0], 1.5 * s[1] / (s[1] + s[2]), 1e-6);
  // Hash-routed: the table's experts whatever the residency and the bonus.
  const int32_t table[2] = {3, 0};
  float hashed[4] = {logits[0], logits[1], logits[2], logits[3]};
  strata::routing::sqrt_softplus_route_row(hashed, sel, 4, 2, sr, table, resident, strong, false, ids, w);
  CHECK_EQ(ids[0], 3);
  CHECK_EQ(ids[1], 0);
  CHECK_NEAR(w[1], 1.5 * s[0] / (s[3] + s[0]), 1e-6);
}
