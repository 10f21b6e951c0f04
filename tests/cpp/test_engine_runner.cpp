// The Runner: eval in chunks with MTP encoding (the ReferenceRunner's semantics), MTP cell
// validity through rollback / commit / restore, and draft parity with the naive reference.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cstring>
#include <vector>

#include "strata/cpu/repack/repack.h"
#include "strata/engine/prepared_model.h"
#include "strata/engine/runner.h"
#include "strata/util/thread_pool.h"
#include "test_engine_reference.h"
#include "test_engine_support.h"

using namespace strata_test;
using strata::engine::LogitRows;
using strata::engine::Runner;
using strata::engine::RunnerConfig;

namespace {
std::vector<int32_t> toks_for(int n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(g() % 61u);
  return t;
}
RunnerConfig cfg_for(int max_rows) {
  RunnerConfig c;
  c.n_threads = 2;
  c.max_ctx = 48;
  c.max_rows = max_rows;
  c.mtp_sink = 2;
  // A draft row reads [p - W, p] (W + 1 cells, SPEC §2.6); the reference's window 4 is (p - 4, p].
  c.mtp_window = 3;
  return c;
}
}  // namespace

TEST(eval_encodes_mtp_and_drafts_match_reference) {
  TinyOptions o;
  // (Seed 21 was used until the softmax moved to exp_f32: there attention weights 1 ulp away moved a K/V
  // value across a rounding step of the int8 cells, which the double reference rounds from its own
  // value: a 4.5e-4 jump in the drafts. Seeds 22-25 agree within 1e-6.)
  o.seed = 22;
  auto toks = toks_for(16, 5);
  const int P = 14;
  // Reference: main streams of 0..P-1, MTP over rows 0..P-1 with next tokens 1..P.
  auto model_ref = tiny_model(o);
  const auto& hp = model_ref->hparams();
  NaiveModel ref(dynamic_cast<const MemorySource&>(model_ref->source()), hp);
  NaiveModel::Streams X, out;
  std::vector<Vec> logits, dl;
  ref.forward(std::vector<int32_t>(toks.begin(), toks.begin() + P), X, logits);
  ref.mtp(X, std::vector<int32_t>(toks.begin() + 1, toks.begin() + P + 1), 2, 4, out, dl);

  std::vector<std::vector<float>> drafts;
  for (int max_rows : {16, 4, 1}) {
    Runner run(tiny_model(o), cfg_for(max_rows));
    std::vector<float> last(hp.n_vocab);
    run.eval(toks.data(), P, 0, LogitRows::Last, last.data());
    for (int c = 0; c < P - 1; ++c) CHECK(run.mtp_cell_valid(c));
    CHECK(!run.mtp_cell_valid(P - 1));
    std::vector<float> dlog(2 * hp.mtp_vocab);
    int32_t dt[2];
    run.mtp_draft(nullptr, toks[P], P - 1, 2, dlog.data(), dt);
    CHECK(run.mtp_cell_valid(P - 1));
    CHECK(!run.mtp_cell_valid(P));  // the chained step's cell is speculative, not committed
    double worst = 0;
    for (uint32_t v = 0; v < hp.mtp_vocab; ++v) worst = std::max(worst, std::fabs(dlog[v] - dl[P - 1][v]));
    CHECK_MSG(worst < 1e-4, "draft vs reference " + std::to_string(worst));
    drafts.push_back(dlog);
  }
  // Chunking of the prompt (and of the MTP encoding) does not change a bit.
  CHECK(drafts[0] == drafts[1]);
  CHECK(drafts[0] == drafts[2]);
}

TEST(mtp_validity_follows_rollback_commit_restore) {
  TinyOptions o;
  auto toks = toks_for(30, 8);
  Runner run(tiny_model(o), cfg_for(8));
  run.eval(toks.data(), 12, 0, LogitRows::Last, nullptr);
  int32_t dt[3];
  run.mtp_draft(nullptr, toks[12], 11, 3, nullptr, dt);
  // Verification window: the true token then the drafts.
  std::vector<int32_t> win = {toks[12], dt[0], dt[1], dt[2]};
  std::vector<float> lg(4 * 61);
  run.eval(win.data(), 4, 12, LogitRows::All, lg.data());
  CHECK_EQ(run.n_past(), int64_t{16});
  for (int c = 0; c <= 14; ++c) CHECK(run.mtp_cell_valid(c));
  CHECK(!run.mtp_cell_valid(15));
  // Accept two rows: keep 14 cells; MTP cell 13 (whose next token is unknown now) is invalid.
  run.commit(14);
  CHECK(run.mtp_cell_valid(12));
  CHECK(!run.mtp_cell_valid(13));
  // The streams of 13 are still held (rows of the last run): drafting from there works.
  CHECK(run.streams_at(13) != nullptr);
  run.mtp_draft(nullptr, toks[14], 13, 2, nullptr, dt);
  auto cp = run.checkpoint();
  run.eval(toks.data() + 14, 3, 14, LogitRows::Last, nullptr);
  CHECK(run.mtp_cell_valid(15));
  run.restore(cp);
  CHECK_EQ(run.n_past(), int64_t{14});
  CHECK(run.mtp_cell_valid(12));
  CHECK(!run.mtp_cell_valid(13));  // written after the checkpoint
  // After a rollback further back than the last run, the streams of 9 are gone: cell 9 cannot be
  // re-encoded. Fed the token it was encoded with at 10 (a repeated prefix) it stays valid...
  run.rollback(10);
  run.eval(toks.data() + 10, 2, 10, LogitRows::Last, nullptr);
  CHECK(run.mtp_cell_valid(9));
  CHECK(run.mtp_cell_valid(10));
  run.mtp_draft(nullptr, toks[12], 11, 1, nullptr, dt);  // reads 9
  // ... fed another token at 10 it is invalid, and a draft that would read it is refused.
  run.rollback(10);
  const int32_t other[2] = {static_cast<int32_t>((toks[10] + 1) % 61), toks[11]};
  run.eval(other, 2, 10, LogitRows::Last, nullptr);
  CHECK(!run.mtp_cell_valid(9));
  CHECK(run.mtp_cell_valid(10));
  // The run restarted after the hole: a draft at 11 reads the sinks 0,1 and 10..11, never 8 or 9.
  run.mtp_draft(nullptr, toks[12], 11, 1, nullptr, dt);
  std::vector<int32_t> list;
  run.draft_cells().draft_row_cells(11, list);
  CHECK(list == (std::vector<int32_t>{0, 1, 10, 11}));
  // Without encoding, nothing is readable: a draft row reads its own cell only.
  RunnerConfig c = cfg_for(8);
  c.encode_mtp = false;
  Runner raw(tiny_model(o), c);
  raw.eval(toks.data(), 10, 0, LogitRows::Last, nullptr);
  CHECK(!raw.mtp_cell_valid(0));
  raw.mtp_draft(nullptr, toks[10], 9, 1, nullptr, dt);
  raw.draft_cells().draft_row_cells(9, list);
  CHECK(list == (std::vector<int32_t>{9}));
  // A model without MTP refuses drafting.
  TinyOptions nm;
  nm.mtp = false;
  Runner plain(tiny_model(nm), cfg_for(8));
  plain.eval(toks.data(), 4, 0, LogitRows::Last, nullptr);
  CHECK(!plain.has_mtp());
  CHECK_THROWS(plain.mtp_draft(nullptr, 1, 3, 1, nullptr, dt));
}

TEST(plain_steps_keep_the_drafter_run) {
  // A prompt, then plain one-token steps: each step's eval re-encodes the previous row, so the run
  // grows and stays whole (a stale mark at the step's position must not drop it).
  TinyOptions o;
  auto toks = toks_for(20, 4);
  Runner run(tiny_model(o), cfg_for(8));
  run.eval(toks.data(), 12, 0, LogitRows::Last, nullptr);
  for (int p = 12; p < 15; ++p) {
    run.eval(&toks[static_cast<std::size_t>(p)], 1, p, LogitRows::Last, nullptr);
    for (int c = 0; c < p; ++c) CHECK(run.mtp_cell_valid(c));
    CHECK_EQ(run.draft_cells().run_begin(), 0);
    CHECK_EQ(run.draft_cells().run_end(), p);
  }
}

TEST(a_window_after_a_draft_leaves_the_draft_steps_cell) {
  // A round: draft from 11 (step 0 writes drafter cell 11 from the streams of 11 and token 12), then
  // the window [t12, d] at 12. The window encodes cell 12 only; cell 11 stays as the draft step wrote
  // it, and the drafts from there on equal those of a sequence that encoded every row by evals alone.
  TinyOptions o;
  auto toks = toks_for(20, 9);
  Runner run(tiny_model(o), cfg_for(8));
  run.eval(toks.data(), 12, 0, LogitRows::Last, nullptr);
  const int64_t before = run.drafter_rows_encoded();
  CHECK_EQ(before, int64_t{11});  // rows 0..10; 11's next token is not known yet
  int32_t dt[1];
  run.mtp_draft(nullptr, toks[12], 11, 1, nullptr, dt);
  const int32_t win[2] = {toks[12], toks[13]};
  run.eval(win, 2, 12, LogitRows::Last, nullptr);
  CHECK_EQ(run.drafter_rows_encoded() - before, int64_t{1});
  for (int c = 0; c <= 12; ++c) CHECK(run.mtp_cell_valid(c));
  Runner ref(tiny_model(o), cfg_for(8));
  ref.eval(toks.data(), 14, 0, LogitRows::Last, nullptr);
  CHECK_EQ(ref.drafter_rows_encoded(), int64_t{13});
  const auto& hp = run.model().hparams();
  std::vector<float> a(2 * hp.mtp_vocab), b(2 * hp.mtp_vocab);
  int32_t ta[2], tb[2];
  run.mtp_draft(nullptr, toks[14], 13, 2, a.data(), ta);
  ref.mtp_draft(nullptr, toks[14], 13, 2, b.data(), tb);
  CHECK(a == b);
  // The draft above wrote cell 13 with token 14; fed another token at 14, cell 13 is encoded again
  // from the held streams (two rows: 13 and 14).
  const int32_t other[2] = {static_cast<int32_t>((toks[14] + 1) % 61), toks[15]};
  const int64_t n0 = run.drafter_rows_encoded();
  run.eval(other, 2, 14, LogitRows::Last, nullptr);
  CHECK_EQ(run.drafter_rows_encoded() - n0, int64_t{2});
  CHECK(run.mtp_cell_valid(13));
  CHECK(run.mtp_cell_valid(14));
}

TEST(rows_skipped_while_encoding_is_off_are_encoded_in_one_batch_later) {
  // Adaptive speculation turns the drafter's encoding off in plain stretches; the sequence keeps the
  // last kPendingRows rows (streams and next token) and encodes them in one batch before the next draft
  // chain (or the next eval that encodes): the chain then reads the same cells, bit for bit, as a
  // sequence that encoded every row.
  TinyOptions o;
  auto toks = toks_for(44, 11);
  constexpr int kKept = strata::engine::Sequence::kPendingRows;
  Runner run(tiny_model(o), cfg_for(32));  // a batch holds every kept row
  Runner ref(tiny_model(o), cfg_for(32));
  run.eval(toks.data(), 12, 0, LogitRows::Last, nullptr);
  ref.eval(toks.data(), 12, 0, LogitRows::Last, nullptr);
  run.set_drafter_encoding(false);
  const int64_t enc0 = run.drafter_rows_encoded();
  const int P = 12 + kKept + 4;  // more plain steps than rows kept
  for (int p = 12; p < P; ++p) {
    run.eval(&toks[static_cast<std::size_t>(p)], 1, p, LogitRows::Last, nullptr);
    ref.eval(&toks[static_cast<std::size_t>(p)], 1, p, LogitRows::Last, nullptr);
  }
  CHECK_EQ(run.drafter_rows_encoded(), enc0);
  for (int c = 11; c < P; ++c) CHECK(!run.mtp_cell_valid(c));
  // The chain at P - 1 first encodes rows P - 1 - kKept .. P - 2 (one batch), then writes cell P - 1.
  const auto& hp = run.model().hparams();
  std::vector<float> a(2 * hp.mtp_vocab), b(2 * hp.mtp_vocab);
  int32_t ta[2], tb[2];
  run.mtp_draft(nullptr, toks[P], P - 1, 2, a.data(), ta);
  ref.mtp_draft(nullptr, toks[P], P - 1, 2, b.data(), tb);
  CHECK_EQ(run.drafter_rows_encoded() - enc0, int64_t{kKept});
  for (int c = 11; c < P - 1 - kKept; ++c) CHECK(!run.mtp_cell_valid(c));
  for (int c = P - 1 - kKept; c < P; ++c) CHECK(run.mtp_cell_valid(c));
  std::vector<int32_t> la, lb;
  run.draft_cells().draft_row_cells(P - 1, la);
  ref.draft_cells().draft_row_cells(P - 1, lb);
  CHECK(la == lb);  // the window (3 cells back) lies inside the rows caught up
  CHECK(a == b);
  CHECK(ta[0] == tb[0] && ta[1] == tb[1]);

  // Encoding back on: the first encoding eval puts the kept rows in front of its own (one batch).
  run.rollback(P);
  const int Q = P + 3;
  for (int p = P; p < Q; ++p) run.eval(&toks[static_cast<std::size_t>(p)], 1, p, LogitRows::Last, nullptr);
  run.set_drafter_encoding(true);
  const int64_t enc1 = run.drafter_rows_encoded();
  run.eval(&toks[static_cast<std::size_t>(Q)], 1, Q, LogitRows::Last, nullptr);
  CHECK_EQ(run.drafter_rows_encoded() - enc1, int64_t{Q - P + 1});  // rows P - 1 .. Q - 1
  for (int c = P - 1 - kKept; c < Q; ++c) CHECK(run.mtp_cell_valid(c));
  CHECK_EQ(run.draft_cells().run_end(), Q);

  // A kept row whose main cells were evaluated again is dropped (its next token may differ), and with it
  // every row before it (a chain reads a run that ends at its own cell): after a rollback and another
  // token, the chain reads the sinks and its own cell only.
  run.set_drafter_encoding(false);
  const int R = Q + 1;
  for (int p = R; p < R + 4; ++p) run.eval(&toks[static_cast<std::size_t>(p)], 1, p, LogitRows::Last, nullptr);
  run.rollback(R + 2);
  const int32_t other = static_cast<int32_t>((toks[R + 2] + 1) % 61);
  run.eval(&other, 1, R + 2, LogitRows::Last, nullptr);
  const int64_t enc2 = run.drafter_rows_encoded();
  run.mtp_draft(nullptr, toks[R + 3], R + 2, 1, nullptr, ta);
  CHECK_EQ(run.drafter_rows_encoded() - enc2, int64_t{0});
  for (int c = R - 1; c <= R + 1; ++c) CHECK(!run.mtp_cell_valid(c));
  CHECK(run.mtp_cell_valid(R + 2));
  std::vector<int32_t> lc;
  run.draft_cells().draft_row_cells(R + 2, lc);
  CHECK(lc == (std::vector<int32_t>{0, 1, R + 2}));
}

TEST(eval_all_logits_in_chunks_equal_rows) {
  TinyOptions o;
  auto toks = toks_for(20, 3);
  Runner a(tiny_model(o), cfg_for(20));
  Runner b(tiny_model(o), cfg_for(3));
  std::vector<float> la(20 * 61), lb(20 * 61);
  a.eval(toks.data(), 20, 0, LogitRows::All, la.data());
  b.eval(toks.data(), 20, 0, LogitRows::All, lb.data());
  CHECK(la == lb);
}

TEST(runners_share_one_prepared_model) {
  // Engines over one prepared model (here: the drafter requantized to Q4_0, R-11) read the same
  // weights and compute bitwise what a runner that prepared its own copy computes, interleaved or not
  // (engine/prepared_model.h). The Python tests cover repacked weights on a Q8_0 file.
  TinyOptions o;
  o.ff = 32;
  o.ff_shared = 32;  // every requantized row length a multiple of 32
  o.seed = 33;
  RunnerConfig c = cfg_for(8);
  c.mtp_requant = strata::model::DrafterRequant::Q4;
  std::shared_ptr<const strata::engine::PreparedModel> prepared =
      strata::engine::prepare_cpu_model(tiny_model(o), strata::model::DrafterRequant::Q4, strata::cpu::RepackMode::On,
                                        true, &strata::ThreadPool::global());
  CHECK(!prepared->model->owned_weights.empty());
  Runner own(tiny_model(o), c);
  Runner a(prepared, c);
  Runner b(prepared, c);
  CHECK(&a.model() == &b.model());
  CHECK(&own.model() != &a.model());
  CHECK(a.model().mtp->fc_hidden.data == b.model().mtp->fc_hidden.data);
  const auto toks = toks_for(20, 3);
  const std::size_t V = own.model().hparams().n_vocab;
  std::vector<float> lo(V), la(V), lb(V);
  own.eval(toks.data(), 12, 0, LogitRows::Last, lo.data());
  a.eval(toks.data(), 12, 0, LogitRows::Last, la.data());
  b.eval(toks.data() + 5, 7, 0, LogitRows::Last, lb.data());  // b elsewhere in between
  CHECK(lo == la);
  for (int i = 12; i < 20; ++i) {
    own.eval(&toks[static_cast<std::size_t>(i)], 1, i, LogitRows::Last, lo.data());
    a.eval(&toks[static_cast<std::size_t>(i)], 1, i, LogitRows::Last, la.data());
    b.eval(&toks[static_cast<std::size_t>(i)], 1, i - 5, LogitRows::Last, lb.data());
    CHECK(lo == la);
  }
  std::vector<float> da(2 * own.model().hparams().mtp_vocab), dob(da.size());
  int32_t ta[2], to[2];
  own.mtp_draft(nullptr, toks[19], 19, 2, dob.data(), to);
  a.mtp_draft(nullptr, toks[19], 19, 2, da.data(), ta);
  CHECK(da == dob);
  // A streaming store cannot take a shared model (it advises the mapping before preparing).
  RunnerConfig sc = c;
  sc.experts.mode = strata::experts::ExpertMode::Stream;
  CHECK_THROWS(Runner(prepared, sc));
}

TEST(repack_lays_each_experts_gate_and_up_side_by_side) {
  // Repacked routed experts (model/weight_repack.h): a layer's gate and up stacks share one buffer,
  // expert by expert, so that a decode step reads an expert's gate and up as one stream; each slice
  // still holds its own rows (unpacked: the file's bytes), and down keeps a stack of its own.
  TinyOptions o;
  o.ff = 32;
  o.ff_shared = 32;
  o.seed = 5;
  o.matrix_type = strata::quant::GGMLType::Q8_0;
  const auto file = tiny_model(o);
  const std::shared_ptr<const strata::engine::PreparedModel> prepared =
      strata::engine::prepare_cpu_model(tiny_model(o), strata::model::DrafterRequant::Off, strata::cpu::RepackMode::On,
                                        true, &strata::ThreadPool::global());
  const strata::model::Model& m = *prepared->model;
  CHECK(prepared->repack.paired == o.layers + 1);  // every layer and the MTP block
  auto check_layer = [](const strata::model::MoeWeights& w, const strata::model::MoeWeights& f) {
    const std::size_t S = w.gate.expert_stride;
    CHECK(strata::cpu::is_repacked(w.gate.type) && strata::cpu::is_repacked(w.up.type));
    CHECK(strata::cpu::is_repacked(w.down.type));
    CHECK(w.up.expert_stride == S && w.gate.step() == 2 * S && w.up.step() == 2 * S);
    CHECK(w.down.step() == w.down.expert_stride);
    CHECK(w.up.data == w.gate.data + S);
    CHECK(w.gate.span_bytes() == (2 * static_cast<std::size_t>(w.gate.n_expert) - 1) * S);
    const strata::model::ExpertWeights* got[3] = {&w.gate, &w.up, &w.down};
    const strata::model::ExpertWeights* want[3] = {&f.gate, &f.up, &f.down};
    for (int p = 0; p < 3; ++p)
      for (int64_t e = 0; e < got[p]->n_expert; ++e) {
        const strata::model::Weight g = got[p]->expert(e), x = want[p]->expert(e);
        std::vector<uint8_t> bytes(got[p]->expert_stride);
        strata::cpu::unpack_rows(g.type, g.data, g.rows, g.cols, bytes.data());
        CHECK(std::memcmp(bytes.data(), x.data, bytes.size()) == 0);
      }
  };
  for (std::size_t l = 0; l < m.layers.size(); ++l) check_layer(m.layers[l].moe, file->layers[l].moe);
  check_layer(m.mtp->block.moe, file->mtp->block.moe);
}

TEST(prepared_model_registry_shares_by_key_while_alive) {
  TinyOptions o;
  int made = 0;
  auto make = [&] {
    ++made;
    auto p = std::make_shared<strata::engine::PreparedModel>();
    p->model = tiny_model(o);
    return p;
  };
  strata::engine::PreparedModelKey k;
  k.file.ino = 424242;  // not a real file's: this test's entries only
  const int alive = strata::engine::prepared_models_alive();
  auto x = strata::engine::shared_prepared_model(k, make);
  auto y = strata::engine::shared_prepared_model(k, make);
  CHECK(x == y);
  CHECK_EQ(made, 1);
  strata::engine::PreparedModelKey k2 = k;
  k2.kv_type = 1;
  auto z = strata::engine::shared_prepared_model(k2, make);
  CHECK(z != x);
  CHECK_EQ(made, 2);
  CHECK_EQ(strata::engine::prepared_models_alive(), alive + 2);
  x.reset();
  y.reset();
  CHECK_EQ(strata::engine::prepared_models_alive(), alive + 1);
  auto again = strata::engine::shared_prepared_model(k, make);  // the last holder went: made anew
  CHECK_EQ(made, 3);
  // The key of a real file follows its identity; a missing file has none.
  CHECK(!strata::engine::prepared_model_key("/nonexistent/strata.gguf", "", std::nullopt,
                                            strata::model::DrafterRequant::Off, strata::cpu::RepackMode::On));
}
