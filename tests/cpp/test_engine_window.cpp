// The Window and the MTP end to end on tiny random models held in memory: against the naive
// double-precision forward pass (test_engine_reference.h) with every feature on and each off in
// turn, chunking invariance (one chunk, many chunks, token by token: bitwise equal), rollback and
// checkpoint exactness, and no allocation on the per-token path.
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

#include "strata/cpu/gemv.h"
#include "strata/engine/linear.h"
#include "strata/engine/mtp.h"
#include "strata/engine/runner.h"
#include "strata/engine/window.h"
#include "strata/util/thread_pool.h"
#include "test_engine_reference.h"
#include "test_engine_support.h"

#include "alloc_counter.h"

using namespace strata_test;
using strata::engine::LogitRows;
using strata::engine::Window;
using strata::engine::WindowConfig;

namespace {

std::vector<int32_t> tokens_for(int n, int vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(g() % static_cast<uint32_t>(vocab));
  return t;
}

const MemorySource& mem(const strata::model::Model& m) { return dynamic_cast<const MemorySource&>(m.source()); }

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Engine logits of every position (token by token with LogitRows::All windows of 3) vs the naive pass.
void check_against_naive(const TinyOptions& o, int n_tok, double tol) {
  auto model = tiny_model(o);
  const auto& hp = model->hparams();
  strata::ThreadPool pool(3);
  WindowConfig cfg;
  cfg.max_ctx = 64;
  cfg.max_rows = 8;
  cfg.pool = &pool;
  Window w(*model, cfg);
  auto toks = tokens_for(n_tok, static_cast<int>(hp.n_vocab), o.seed + 100);
  NaiveModel ref(mem(*model), hp);
  NaiveModel::Streams X;
  std::vector<Vec> logits;
  ref.forward(toks, X, logits);
  double worst = 0;
  for (int start = 0; start < n_tok; start += 3) {
    const int rows = std::min(3, n_tok - start);
    w.run(toks.data() + start, rows, start, LogitRows::All);
    for (int r = 0; r < rows; ++r) {
      const auto& L = logits[static_cast<std::size_t>(start + r)];
      const double scale = std::max(1.0, max_abs(L));
      for (uint32_t v = 0; v < hp.n_vocab; ++v) worst = std::max(worst, std::fabs(w.logits(r)[v] - L[v]) / scale);
      // Final streams too.
      const float* fs = w.final_streams(r);
      for (uint32_t s = 0; s < hp.hc_count; ++s)
        for (uint32_t i = 0; i < hp.n_embd; ++i)
          worst = std::max(worst, std::fabs(fs[s * hp.n_embd + i] - X[static_cast<std::size_t>(start + r)][s][i]) /
                                      std::max(1.0, max_abs(X[static_cast<std::size_t>(start + r)][s])));
    }
  }
  CHECK_MSG(worst <= tol, "max relative diff " + std::to_string(worst));
  if (std::getenv("STRATA_TEST_VERBOSE")) std::printf("naive diff %.3g\n", worst);
}

}  // namespace

TEST(hparams_are_read) {
  TinyOptions o;
  auto m = tiny_model(o);
  const auto& hp = m->hparams();
  CHECK_EQ(hp.n_layer, 2u);
  CHECK_EQ(hp.n_block, 3u);
  CHECK_EQ(hp.n_nextn, 1u);
  CHECK_EQ(hp.n_vocab, 61u);
  CHECK_EQ(hp.hc_count, 4u);
  CHECK(hp.attn_gated);
  CHECK(hp.uses_indexer());
  CHECK_EQ(hp.mtp_vocab, 23u);
  CHECK(m->mtp.has_value());
  CHECK(m->layers[0].attn.idx_q.present());
  CHECK(!m->mtp->block.attn.idx_q.present());
  CHECK_EQ(m->layers[1].moe.gate.n_expert, int64_t{6});
  CHECK_EQ(m->layers[1].moe.down.rows, int64_t{32});
  CHECK_EQ(m->layers[1].moe.down.cols, int64_t{24});
  TinyOptions q;
  q.qwen3moe = true;
  auto mq = tiny_model(q);
  CHECK(mq->hparams().arch == strata::model::Arch::Qwen3Moe);
  CHECK(mq->hparams().kv_type == strata::model::KvType::F32);
  CHECK_EQ(mq->hparams().hc_count, 1u);
  CHECK(!mq->mtp.has_value());
}

TEST(huge_sink_window_top_k_stay_bounded) {
  // Keys no tensor bounds: the lists are bounded by the cells, nothing is sized by the keys.
  auto src = tiny_source(TinyOptions{});
  src->set_u("strata.attention.indexer.top_k", 4000000000ull);
  src->set_u("strata.attention.sink_count", 4000000000ull);
  src->set_u("strata.attention.sliding_window", 4000000000ull);
  auto model = strata::model::Model::from_source(std::move(src));
  WindowConfig cfg;
  cfg.max_ctx = 32;
  cfg.max_rows = 8;
  Window w(*model, cfg);
  CHECK(w.scratch().shape.max_list <= 32);
  auto toks = tokens_for(20, 61, 2);
  w.run(toks.data(), 8, 0, LogitRows::Last);
  w.run(toks.data() + 8, 8, 8, LogitRows::Last);
  // Every cell is a sink: the same as full causal attention.
  TinyOptions full;
  full.window = 0;
  auto fm = tiny_model(full);
  cfg.max_rows = 16;
  Window wf(*fm, cfg);
  wf.run(toks.data(), 16, 0, LogitRows::Last);
  CHECK(std::memcmp(w.logits(0), wf.logits(0), 61 * 4) == 0);
}

TEST(matches_naive_reference_all_features) { check_against_naive(TinyOptions{}, 20, 1e-4); }

TEST(matches_naive_reference_features_off_in_turn) {
  {
    TinyOptions o;
    o.hc = 1;
    check_against_naive(o, 14, 1e-4);
  }
  {
    TinyOptions o;
    o.gated = false;
    check_against_naive(o, 14, 1e-4);
  }
  {
    TinyOptions o;
    o.window = 0;
    check_against_naive(o, 14, 1e-4);
  }
  {
    TinyOptions o;
    o.idx_heads = 0;
    check_against_naive(o, 14, 1e-4);
  }
  {
    TinyOptions o;
    o.ff_shared = 0;
    check_against_naive(o, 14, 1e-4);
  }
  {
    TinyOptions o;
    o.mtp = false;
    o.sink = 0;
    o.rope_dim = 8;
    check_against_naive(o, 14, 1e-4);
  }
}

TEST(qwen3moe_matches_naive_reference) {
  TinyOptions o;
  o.qwen3moe = true;
  check_against_naive(o, 16, 1e-5);
}

namespace {
// Every position's logits token by token (61 of them), then the same positions as one chunk with every
// row's logits, checked bitwise against them; returns the token-by-token logits.
std::vector<std::vector<float>> token_by_token_then_one_chunk(Window& w, const std::vector<int32_t>& toks, int n) {
  std::vector<std::vector<float>> ref;
  for (int p = 0; p < n; ++p) {
    w.run(toks.data() + p, 1, p, LogitRows::Last);
    ref.emplace_back(w.logits(0), w.logits(0) + 61);
  }
  w.rollback(0);
  w.run(toks.data(), n, 0, LogitRows::All);
  for (int p = 0; p < n; ++p) CHECK(std::memcmp(w.logits(p), ref[static_cast<std::size_t>(p)].data(), 61 * 4) == 0);
  return ref;
}
}  // namespace

// The same invariance over the implicit cell list (no sliding window: rows of a chunk or window attend
// together, attend_rows), for head groups of 2 (8 rows a pass) and 1 (4 a pass, MHA), chunks and
// windows of every size up to 7 rows, some not a multiple of the pass.
TEST(chunking_is_bitwise_invariant_over_the_implicit_cell_list) {
  for (int kv_heads : {2, 4}) {
    TinyOptions o;
    o.seed = 11;
    o.window = 0;
    o.kv_heads = kv_heads;
    auto model = tiny_model(o);
    strata::ThreadPool pool(2);
    const int n = 29;
    auto toks = tokens_for(n, 61, 5);
    WindowConfig cfg;
    cfg.max_ctx = 64;
    cfg.max_rows = 32;
    cfg.pool = &pool;
    Window w(*model, cfg);
    const std::vector<std::vector<float>> ref = token_by_token_then_one_chunk(w, toks, n);
    for (int rows = 2; rows <= 7; ++rows) {
      w.rollback(0);
      w.run(toks.data(), 13, 0, LogitRows::None);
      w.run(toks.data() + 13, rows, 13, LogitRows::All);
      for (int r = 0; r < rows; ++r)
        CHECK_MSG(std::memcmp(w.logits(r), ref[static_cast<std::size_t>(13 + r)].data(), 61 * 4) == 0,
                  "kv_heads " + std::to_string(kv_heads) + " window of " + std::to_string(rows) + " row " +
                      std::to_string(r));
    }
  }
}

TEST(chunking_is_bitwise_invariant) {
  TinyOptions o;
  o.seed = 7;
  auto model = tiny_model(o);
  strata::ThreadPool pool(2);
  const int n = 23;
  auto toks = tokens_for(n, 61, 3);
  std::vector<std::vector<float>> ref;  // logits of every position, token by token
  {
    WindowConfig cfg;
    cfg.max_ctx = 64;
    cfg.max_rows = 32;
    cfg.pool = &pool;
    Window w(*model, cfg);
    ref = token_by_token_then_one_chunk(w, toks, n);  // and one chunk with every row's logits
    // Verification windows of 4 rows after a prefix.
    w.rollback(0);
    w.run(toks.data(), 11, 0, LogitRows::Last);
    CHECK(std::memcmp(w.logits(0), ref[10].data(), 61 * 4) == 0);
    w.run(toks.data() + 11, 4, 11, LogitRows::All);
    for (int r = 0; r < 4; ++r)
      CHECK(std::memcmp(w.logits(r), ref[static_cast<std::size_t>(11 + r)].data(), 61 * 4) == 0);
  }
  // Streaming in chunks of 5 with a callback.
  {
    WindowConfig cfg;
    cfg.max_ctx = 64;
    cfg.max_rows = 8;
    cfg.pool = &pool;
    Window w(*model, cfg);
    std::vector<int64_t> starts;
    for (int64_t s = 0; s < n; s += 5) {  // what the Sequence's chunked eval does (engine/sequence.h)
      const int rows = static_cast<int>(std::min<int64_t>(5, n - s));
      w.run(toks.data() + s, rows, s, s + rows == n ? LogitRows::Last : LogitRows::None);
      starts.push_back(s);
      CHECK_EQ(w.rows(), rows);
    }
    CHECK((starts == std::vector<int64_t>{0, 5, 10, 15, 20}));
    CHECK(std::memcmp(w.logits(0), ref[static_cast<std::size_t>(n - 1)].data(), 61 * 4) == 0);
    CHECK_EQ(w.n_past(), int64_t{n});
  }
  // A single-threaded pool gives the same bits.
  {
    strata::ThreadPool one(1);
    WindowConfig cfg;
    cfg.max_ctx = 64;
    cfg.pool = &one;
    Window w(*model, cfg);
    w.run(toks.data(), n, 0, LogitRows::Last);
    CHECK(std::memcmp(w.logits(0), ref[static_cast<std::size_t>(n - 1)].data(), 61 * 4) == 0);
  }
}

TEST(rollback_commit_checkpoint_are_exact) {
  auto model = tiny_model(TinyOptions{});
  strata::ThreadPool pool(2);
  WindowConfig cfg;
  cfg.max_ctx = 40;
  cfg.max_rows = 20;
  cfg.pool = &pool;
  Window w(*model, cfg);
  auto toks = tokens_for(30, 61, 9);
  w.run(toks.data(), 20, 0, LogitRows::Last);
  std::vector<float> at20(w.logits(0), w.logits(0) + 61);
  w.commit(20);
  CHECK_EQ(w.n_committed(), int64_t{20});
  auto cp = w.checkpoint();
  // Speculative rows with other tokens, then rollback and recompute.
  auto other = tokens_for(6, 61, 99);
  w.run(other.data(), 6, 20, LogitRows::All);
  CHECK_EQ(w.n_past(), int64_t{26});
  w.rollback(20);
  CHECK_THROWS(w.commit(19));  // below the committed length
  w.run(toks.data() + 20, 5, 20, LogitRows::All);
  std::vector<float> a(w.logits(4), w.logits(4) + 61);
  w.restore(cp);
  CHECK_EQ(w.n_past(), int64_t{20});
  w.run(toks.data() + 20, 5, 20, LogitRows::All);
  CHECK(std::memcmp(w.logits(4), a.data(), 61 * 4) == 0);
  // Recompute the whole prefix after rolling back to 0: same bits as the first time.
  w.rollback(0);
  CHECK_EQ(w.n_committed(), int64_t{0});
  w.run(toks.data(), 20, 0, LogitRows::Last);
  CHECK(std::memcmp(w.logits(0), at20.data(), 61 * 4) == 0);
  // A checkpoint whose cells were rewritten since is refused.
  auto cp2 = w.checkpoint();
  w.rollback(10);
  w.run(other.data(), 3, 10, LogitRows::None);
  CHECK_THROWS(w.restore(cp2));
  // Bad requests.
  CHECK_THROWS(w.run(toks.data(), 1, 20, LogitRows::Last));  // beyond n_past
  CHECK_THROWS(w.run(toks.data(), 21, 0, LogitRows::Last));  // more than max_rows
  const int32_t bad = 61;
  CHECK_THROWS(w.run(&bad, 1, 0, LogitRows::Last));  // outside the vocabulary
  CHECK_THROWS(w.rollback(100));
  w.rollback(0);
  w.run(toks.data(), 20, 0, LogitRows::None);
  w.commit(20);
  w.run(toks.data(), 16, 20, LogitRows::None);
  CHECK_THROWS(w.run(toks.data(), 5, 36, LogitRows::None));  // beyond max_ctx
}

TEST(mtp_matches_naive_reference_and_batches_bitwise) {
  TinyOptions o;
  o.seed = 5;
  auto model = tiny_model(o);
  const auto& hp = model->hparams();
  strata::ThreadPool pool(2);
  WindowConfig cfg;
  cfg.max_ctx = 64;
  cfg.max_rows = 16;
  cfg.pool = &pool;
  Window w(*model, cfg);
  const int n = 14;
  auto toks = tokens_for(n + 1, 61, 4);
  w.run(toks.data(), n, 0, LogitRows::Last);
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  std::vector<float> H(static_cast<std::size_t>(n) * nd);
  for (int r = 0; r < n; ++r) std::memcpy(H.data() + static_cast<std::size_t>(r) * nd, w.final_streams(r), nd * 4);
  // MTP rows 0..n-1: (H_p, t_{p+1}) with a small sink/window so both matter.
  strata::engine::MtpConfig mc;
  mc.sink = 2;
  mc.window = 4;
  mc.max_ctx = 64;
  mc.max_rows = 16;
  mc.pool = &pool;
  strata::engine::Mtp mtp(*model, mc);
  std::vector<int32_t> next(toks.begin() + 1, toks.begin() + 1 + n);
  mtp.run(H.data(), next.data(), n, 0, true);
  // Naive: the main model's streams then the MTP over all rows.
  NaiveModel ref(mem(*model), hp);
  NaiveModel::Streams X, out;
  std::vector<Vec> logits, dl;
  ref.forward(std::vector<int32_t>(toks.begin(), toks.begin() + n), X, logits);
  ref.mtp(X, next, 2, 4, out, dl);
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    const double scale = std::max(1.0, max_abs(dl[static_cast<std::size_t>(r)]));
    for (uint32_t v = 0; v < hp.mtp_vocab; ++v)
      worst = std::max(worst, std::fabs(mtp.draft_logits(r)[v] - dl[static_cast<std::size_t>(r)][v]) / scale);
  }
  CHECK_MSG(worst <= 1e-4, "MTP max relative diff " + std::to_string(worst));
  std::vector<float> batch_last(mtp.draft_logits(n - 1), mtp.draft_logits(n - 1) + hp.mtp_vocab);
  const int32_t tok_last = mtp.draft_token(n - 1);
  // Rows one at a time give the same bits as the batch (R-10's gemm = gemv property end to end).
  for (int r = 0; r < n; ++r)
    mtp.run(H.data() + static_cast<std::size_t>(r) * nd, &next[static_cast<std::size_t>(r)], 1, r, true);
  CHECK(std::memcmp(mtp.draft_logits(0), batch_last.data(), hp.mtp_vocab * 4) == 0);
  CHECK_EQ(mtp.draft_token(0), tok_last);
  // The draft token is vocab_ids[argmax].
  int best = 0;
  for (uint32_t v = 1; v < hp.mtp_vocab; ++v)
    if (batch_last[v] > batch_last[static_cast<std::size_t>(best)]) best = static_cast<int>(v);
  CHECK_EQ(tok_last, mtp.vocab_ids()[best]);
  // A chain equals explicit steps.
  std::vector<float> chain_logits(3 * hp.mtp_vocab);
  int32_t chain_toks[3];
  mtp.draft_chain(H.data() + static_cast<std::size_t>(n - 1) * nd, next[static_cast<std::size_t>(n - 1)], n - 1, 3,
                  chain_logits.data(), chain_toks);
  CHECK(std::memcmp(chain_logits.data(), batch_last.data(), hp.mtp_vocab * 4) == 0);
  CHECK_EQ(chain_toks[0], tok_last);
  std::vector<float> streams(mtp.out_streams(0), mtp.out_streams(0) + nd);  // step 3's streams
  (void)streams;
  mtp.run(H.data() + static_cast<std::size_t>(n - 1) * nd, &next[static_cast<std::size_t>(n - 1)], 1, n - 1, true);
  std::vector<float> s1(mtp.out_streams(0), mtp.out_streams(0) + nd);
  mtp.run(s1.data(), &chain_toks[0], 1, n, true);
  CHECK(std::memcmp(mtp.draft_logits(0), chain_logits.data() + hp.mtp_vocab, hp.mtp_vocab * 4) == 0);
  CHECK_EQ(mtp.draft_token(0), chain_toks[1]);
  // encode() writes exactly the cell bytes run() writes.
  {
    strata::engine::Mtp full(*model, mc), kvonly(*model, mc);
    full.run(H.data(), next.data(), n, 0, false);
    kvonly.encode(H.data(), next.data(), n, 0);
    std::vector<float> a(hp.head_dim), b(hp.head_dim);
    bool same = true;
    for (int c = 0; c < n; ++c)
      for (int g = 0; g < static_cast<int>(hp.n_head_kv); ++g) {
        full.kv().read_k(0, c, g, a.data());
        kvonly.kv().read_k(0, c, g, b.data());
        same = same && a == b;
        full.kv().read_v(0, c, g, a.data());
        kvonly.kv().read_v(0, c, g, b.data());
        same = same && a == b;
      }
    CHECK(same);
    // run_row with the list the policy would pick equals run(); a different list changes the result.
    const int64_t p = n - 1;
    std::vector<int32_t> list = {0, 1, 10, 11, 12, 13};  // sinks 0,1 and window (9, 13]
    full.run(H.data() + static_cast<std::size_t>(p) * nd, &next[static_cast<std::size_t>(p)], 1, p, true);
    std::vector<float> by_policy(full.draft_logits(0), full.draft_logits(0) + hp.mtp_vocab);
    kvonly.run_row(H.data() + static_cast<std::size_t>(p) * nd, next[static_cast<std::size_t>(p)], p, list.data(),
                   static_cast<int64_t>(list.size()), true);
    CHECK(std::memcmp(kvonly.draft_logits(0), by_policy.data(), hp.mtp_vocab * 4) == 0);
    std::vector<int32_t> other = {0, 1, 9, 10, 11, 12, 13};
    kvonly.run_row(H.data() + static_cast<std::size_t>(p) * nd, next[static_cast<std::size_t>(p)], p, other.data(),
                   static_cast<int64_t>(other.size()), true);
    CHECK(std::memcmp(kvonly.draft_logits(0), by_policy.data(), hp.mtp_vocab * 4) != 0);
    std::vector<int32_t> bad1 = {0, 3, 2}, bad2 = {0, 14};
    CHECK_THROWS(kvonly.run_row(H.data(), next[0], p, bad1.data(), 3, true));  // not ascending
    CHECK_THROWS(kvonly.run_row(H.data(), next[0], p, bad2.data(), 2, true));  // past the row
    CHECK_THROWS(kvonly.run_row(H.data(), next[0], p, list.data(), 0, true));  // empty
  }
  // Contiguous vocab_ids use a view of output.weight: same math.
  TinyOptions oc = o;
  oc.mtp_ids_contiguous = true;
  auto mc_model = tiny_model(oc);
  strata::engine::Mtp mtp2(*mc_model, mc);
  mtp2.run(H.data(), next.data(), 1, 0, true);
  CHECK(mtp2.draft_token(0) >= 3 && mtp2.draft_token(0) < 3 + 23);
  // head_q4 (the product's default): a gathered head stored wider than Q4_0 becomes Q4_0 (repacked or
  // not), its logits move by that rounding only; a view of the main head (contiguous ids) stays as stored.
  CHECK(mtp.head_type() == strata::quant::GGMLType::F32);
  strata::engine::MtpConfig q4c = mc;
  q4c.head_q4 = true;
  strata::engine::Mtp q4(*model, q4c);
  CHECK(q4.head_type() == strata::quant::GGMLType::Q4_0 || q4.head_type() == strata::quant::GGMLType::Q4_0_R16);
  q4.run(H.data(), next.data(), 1, 0, true);
  mtp.run(H.data(), next.data(), 1, 0, true);
  double moved = 0, scale = 1;
  for (uint32_t v = 0; v < hp.mtp_vocab; ++v) {
    moved = std::max(moved, static_cast<double>(std::fabs(q4.draft_logits(0)[v] - mtp.draft_logits(0)[v])));
    scale = std::max(scale, static_cast<double>(std::fabs(mtp.draft_logits(0)[v])));
  }
  CHECK_MSG(moved > 1e-5 && moved / scale < 0.2, "Q4_0 head moved the logits by " + std::to_string(moved));
  strata::engine::Mtp q4view(*mc_model, q4c);
  CHECK(q4view.head_type() == mtp2.head_type());
}

TEST(no_allocation_per_token) {
  auto model = tiny_model(TinyOptions{});
  strata::ThreadPool pool(3);
  WindowConfig cfg;
  cfg.max_ctx = 64;
  cfg.max_rows = 16;
  cfg.extra_list = 2 + 4 + 1;
  cfg.pool = &pool;
  Window w(*model, cfg);
  strata::engine::MtpConfig mc;
  mc.sink = 2;
  mc.window = 4;
  mc.max_ctx = 64;
  mc.max_rows = 16;
  mc.pool = &pool;
  strata::engine::Mtp mtp(*model, mc, &w.scratch());
  auto toks = tokens_for(40, 61, 1);
  w.run(toks.data(), 12, 0, LogitRows::Last);
  // Encode the MTP cells of positions 0..10 (the drafter reads its sinks and window).
  std::vector<float> H12(static_cast<std::size_t>(12) * 4 * 32);
  for (int r = 0; r < 12; ++r) std::memcpy(H12.data() + r * 128, w.final_streams(r), 128 * 4);
  mtp.encode(H12.data(), toks.data() + 1, 11, 0);
  const std::size_t sig = w.scratch().capacity_signature();
  int32_t drafts[3];
  // Warm every path once.
  w.run(toks.data() + 12, 1, 12, LogitRows::Last);
  w.run(toks.data() + 13, 4, 13, LogitRows::All);
  mtp.draft_chain(w.final_streams(3), toks[17], 16, 3, nullptr, drafts);
  const long before = g_allocs.load();
  for (int p = 17; p < 30; ++p) {
    w.run(toks.data() + p, 1, p, LogitRows::Last);
    mtp.draft_chain(w.final_streams(0), toks[static_cast<std::size_t>(p + 1)], p, 3, nullptr, drafts);
  }
  w.run(toks.data() + 30, 5, 30, LogitRows::All);
  const long after = g_allocs.load();
  CHECK_EQ(after - before, 0L);
  CHECK_EQ(w.scratch().capacity_signature(), sig);

  // The Runner's decode round (eval, MTP encoding, chained drafts, verification, commit) too.
  strata::engine::RunnerConfig rc;
  rc.n_threads = 3;
  rc.max_ctx = 64;
  rc.max_rows = 16;
  rc.mtp_sink = 2;
  rc.mtp_window = 4;
  strata::engine::Runner run(tiny_model(TinyOptions{}), rc);
  std::vector<float> logits(61 * 4);
  run.eval(toks.data(), 10, 0, LogitRows::Last, logits.data());
  auto round = [&](int32_t t) {
    run.mtp_draft(nullptr, t, run.n_past() - 1, 3, nullptr, drafts);
    const int32_t win[4] = {t, drafts[0], drafts[1], drafts[2]};
    const int64_t base = run.n_past();
    run.eval(win, 4, base, LogitRows::All, logits.data());
    run.commit(base + 2);
  };
  round(toks[10]);
  const long before_rounds = g_allocs.load();
  for (int i = 0; i < 8; ++i) round(toks[static_cast<std::size_t>(11 + i)]);
  CHECK_EQ(g_allocs.load() - before_rounds, 0L);
}

TEST(decode_step_needs_five_dispatches_per_layer) {
  // Weights big enough that every linear region is threaded (> cpu::kParallelMinBytes): a decode
  // row costs per layer the attention projections, the attention heads, the output projection, the
  // gate/up region of the routed AND shared experts, and the down region — no dispatch per expert
  // and none for the shared expert on its own.
  TinyOptions o;
  o.d = 128;
  o.heads = 8;
  o.kv_heads = 2;
  o.head_dim = 32;
  o.rope_dim = 32;
  o.experts = 8;
  o.used = 2;
  o.ff = 256;
  o.ff_shared = 256;
  auto model = tiny_model(o);
  const auto& hp = model->hparams();
  strata::ThreadPool pool(3);
  WindowConfig cfg;
  cfg.max_ctx = 64;
  cfg.max_rows = 8;
  cfg.pool = &pool;
  Window w(*model, cfg);
  auto toks = tokens_for(24, static_cast<int>(hp.n_vocab), 5);
  w.run(toks.data(), 8, 0, LogitRows::Last);
  const uint64_t before = pool.dispatches();
  const int steps = 10;
  for (int p = 8; p < 8 + steps; ++p) w.run(toks.data() + p, 1, p, LogitRows::Last);
  const double per_token = static_cast<double>(pool.dispatches() - before) / steps;
  if (std::getenv("STRATA_TEST_VERBOSE")) std::printf("dispatches per decode token: %.1f\n", per_token);
  CHECK(per_token >= static_cast<double>(hp.n_layer));  // the regions are threaded at all
  CHECK_MSG(per_token <= 5.0 * hp.n_layer + 1, "dispatches per decode token: " + std::to_string(per_token));
}

TEST(r10_fc_hidden_one_gemm_equals_n_gemv) {
  // the MTP applies fc_hidden to the n streams (of all rows) as ONE gemm; each stream's
  // result must be bitwise what a separate gemv gives — for float and block weights alike.
  for (auto type : {strata::quant::GGMLType::F32, strata::quant::GGMLType::F16}) {
    TinyOptions o;
    o.matrix_type = type;
    auto model = tiny_model(o);
    const auto& w = model->mtp->fc_hidden;
    std::mt19937 g(3);
    auto X = randn(g, 4 * 3 * 32, 1.0f);  // 3 rows x 4 streams
    std::vector<float> one(static_cast<std::size_t>(12 * 32)), sep(static_cast<std::size_t>(12 * 32));
    strata::ThreadPool pool(2);
    strata::engine::linear(w, X.data(), 12, one.data(), &pool);
    for (int i = 0; i < 12; ++i)
      strata::cpu::gemv(w.type, w.data, w.rows, w.cols, X.data() + i * 32, sep.data() + i * 32, nullptr);
    CHECK(std::memcmp(one.data(), sep.data(), one.size() * 4) == 0);
  }
}
