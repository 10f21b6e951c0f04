// engine::Sequence over the Metal backend on the emulator (backend "metal-emu"), and the sequence
// tests (rollback and restore, the drafter's cells and ledger, a randomized speculation run) through
// the same code on the CPU backend too:
//   - a 4-row verification window's logits are bitwise the four one-row evals (the kernels are
//     row-independent: batched GEMV rows, per-row norms, attention and MoE entries);
//   - rollback and restore, then continuing, give bitwise the logits and drafts of a fresh run; a
//     stale checkpoint is refused;
//   - the drafter's cells follow draft::DraftCells: a draft row reads exactly sink ∪ [pos − W, pos],
//     cells a rollback/restore made unreliable are left out, and the ground-truth CellLedger (checked
//     on every draft row) throws on a read of anything but committed drafter K/V or this round's chain;
//   - greedy speculative decoding written against DecodeTarget (draft chain, one verification window,
//     rollback) gives exactly the tokens of plain greedy decoding, which equal the CPU backend's;
//   - the shared draft loop (draft::Speculator) on MetalModel gives the CPU Runner's greedy tokens, and
//     a randomized session (prompts in random chunks, rounds at random temperatures and retention,
//     rollbacks, restores) never reads a drafter cell the ledger does not vouch for.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/metal_model.h"
#include "strata/draft/speculator.h"
#include "strata/engine/cell_ledger.h"
#include "strata/engine/runner.h"
#include "strata/engine/sequence.h"
#include "strata/sampling/sample_dist.h"
#include "strata/util/error.h"
#include "test_engine_support.h"

using strata::engine::DecodeTarget;
using strata::engine::LogitRows;
using strata::engine::Sequence;
using strata_test::TinyOptions;

namespace {

constexpr int kSink = 2, kWin = 6;

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// A tiny strata model with every feature and an MTP layer behind a Sequence on one backend:
// "metal-emu" (an emulator that reverses the dispatches between barriers) or "cpu" (Window + Mtp).
constexpr const char* kBackends[] = {"metal-emu", "cpu"};

struct Emu {
  std::unique_ptr<strata::model::Model> model;
  std::unique_ptr<strata::mtl::EmuDevice> dev;
  std::unique_ptr<Sequence> m;
  explicit Emu(const TinyOptions& o, int max_rows = 5, int64_t max_ctx = 96, const char* backend = "metal-emu") {
    strata::engine::SequenceConfig sc;
    sc.mtp_sink = kSink;
    sc.mtp_window = kWin;
    if (std::string(backend) == "cpu") {
      strata::engine::RunnerConfig rc;
      rc.n_threads = 1;
      rc.max_rows = max_rows;
      rc.max_ctx = max_ctx;
      rc.mtp_sink = kSink;
      rc.mtp_window = kWin;
      m = std::make_unique<strata::engine::Runner>(strata_test::tiny_model(o), rc);
      return;
    }
    model = strata_test::tiny_model(o);
    dev = std::make_unique<strata::mtl::EmuDevice>(strata::emu::Options{}, /*reverse_between_barriers=*/true);
    strata::mtl::MetalModelConfig mc;
    mc.max_rows = max_rows;
    mc.max_ctx = max_ctx;
    m = strata::mtl::metal_sequence(*dev, *model, mc, sc);
  }
  int V() const { return m->n_vocab(); }
  int Vr() const { return m->draft_vocab(); }
  uint64_t violations() const { return dev ? dev->emulator().violation_count() : 0; }
};

std::vector<int32_t> prompt_of(int n, int V, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 13 + salt) % V);
  return p;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Greedy decoding of n_new tokens after `prompt`; speculative with k drafts per round when k > 0:
// draft_begin at the last committed row, k chained steps, the window [pending, drafts...] evaluated
// with every row's logits (rows >= 1 are draft rows), the longest agreeing prefix kept, rollback.
// oracle (optional): the known greedy continuation; every other round verifies a prefix of it in
// place of the drafter's tokens (a random tiny drafter is rarely right, and acceptance must be
// exercised: windows that keep 1..k drafts).
struct Decoded {
  std::vector<int32_t> tokens;
  int rounds = 0, drafted = 0, accepted = 0;
};
Decoded greedy(DecodeTarget& t, const std::vector<int32_t>& prompt, int n_new, int k,
               const std::vector<int32_t>* oracle = nullptr) {
  const int V = t.n_vocab();
  std::vector<float> logits(static_cast<size_t>(V) * (k + 1));
  Decoded d;
  t.eval(prompt.data(), static_cast<int64_t>(prompt.size()), 0, LogitRows::Last, logits.data(), -1);
  int32_t pending = argmax(logits.data(), V);
  d.tokens.push_back(pending);
  std::vector<int32_t> window(static_cast<size_t>(k + 1));
  while (static_cast<int>(d.tokens.size()) < n_new) {
    const int64_t p = t.n_past();  // the pending token's position
    if (k == 0) {
      t.eval(&pending, 1, p, LogitRows::Last, logits.data(), -1);
      pending = argmax(logits.data(), V);
      d.tokens.push_back(pending);
      continue;
    }
    ++d.rounds;
    t.draft_begin(p - 1, pending);
    window[0] = pending;
    for (int j = 0; j < k; ++j) window[static_cast<size_t>(j + 1)] = t.draft_step(nullptr);
    d.drafted += k;
    if (oracle && d.rounds % 2 == 0) {
      const size_t at = d.tokens.size();  // oracle[at..] continues after the pending token
      const int good = d.rounds / 2 % (k + 1);
      for (int j = 0; j < good && at + j < oracle->size(); ++j) window[static_cast<size_t>(j + 1)] = (*oracle)[at + j];
    }
    t.eval(window.data(), k + 1, p, LogitRows::All, logits.data(), 1);
    int a = 0;
    while (a < k && argmax(logits.data() + static_cast<size_t>(a) * V, V) == window[static_cast<size_t>(a + 1)]) ++a;
    d.accepted += a;
    t.rollback(p + 1 + a);
    for (int i = 1; i <= a; ++i) d.tokens.push_back(window[static_cast<size_t>(i)]);
    pending = argmax(logits.data() + static_cast<size_t>(a) * V, V);
    d.tokens.push_back(pending);
  }
  d.tokens.resize(static_cast<size_t>(n_new));
  return d;
}

}  // namespace

TEST(verification_window_logits_equal_one_row_evals) {
  TinyOptions o;
  o.seed = 21;
  Emu e(o);
  Sequence& m = *e.m;
  const int V = e.V();
  const auto prompt = prompt_of(10, V, 3);
  m.eval(prompt.data(), 10, 0, nullptr);
  const int32_t win[4] = {7, 19, 2, 40};
  std::vector<float> all(static_cast<size_t>(4) * V), one(static_cast<size_t>(V));
  m.eval(win, 4, 10, LogitRows::All, all.data(), 1);
  CHECK_EQ(m.n_past(), int64_t{14});
  m.rollback(10);
  int rows_equal = 0;
  for (int r = 0; r < 4; ++r) {
    m.eval(&win[r], 1, 10 + r, one.data());
    rows_equal += std::memcmp(one.data(), all.data() + static_cast<size_t>(r) * V, V * sizeof(float)) == 0;
  }
  std::printf("4-row verification window vs four 1-row evals: %d of 4 rows bitwise equal\n", rows_equal);
  CHECK_EQ(rows_equal, 4);
  // A window that spans two chunks (max_rows 5): the logits of rows 5.. come from the second chunk.
  std::vector<int32_t> long_win = {1, 2, 3, 4, 5, 6, 7};
  std::vector<float> lw(static_cast<size_t>(7) * V);
  m.rollback(10);
  m.eval(long_win.data(), 7, 10, LogitRows::All, lw.data(), 1);
  m.rollback(10);
  for (int r = 0; r < 7; ++r) m.eval(&long_win[static_cast<size_t>(r)], 1, 10 + r, one.data());
  CHECK(std::memcmp(one.data(), lw.data() + static_cast<size_t>(6) * V, V * sizeof(float)) == 0);
  CHECK_THROWS(m.eval(win, 4, 10, LogitRows::All, nullptr, -1));
  CHECK_EQ(e.violations(), uint64_t{0});
}

void rollback_and_restore_then_continue_equal_a_fresh_run_on(const char* backend) {
  std::printf("backend %s\n", backend);
  TinyOptions o;
  o.seed = 22;
  const int steps = 3;
  // Fresh: prompt, three single-token steps, then a 3-step draft chain from the last row.
  Emu fresh(o, 5, 96, backend);
  const int V = fresh.V(), Vr = fresh.Vr();
  const auto prompt = prompt_of(12, V, 5);
  const int32_t cont[4] = {9, 33, 4, 17};
  std::vector<std::vector<float>> want;
  std::vector<float> lg(static_cast<size_t>(V));
  fresh.m->eval(prompt.data(), 12, 0, lg.data());
  want.push_back(lg);
  for (int s = 0; s < steps; ++s) {
    fresh.m->eval(&cont[s], 1, 12 + s, lg.data());
    want.push_back(lg);
  }
  std::vector<float> dl_want(static_cast<size_t>(3) * Vr), dl(static_cast<size_t>(3) * Vr);
  std::vector<int32_t> dt_want(3), dt(3);
  fresh.m->mtp_draft(nullptr, cont[3], 14, 3, dl_want.data(), dt_want.data());

  // Rollback: a 4-row window whose first token is cont[0], a draft chain past it, then back to 13.
  {
    Emu e(o, 5, 96, backend);
    Sequence& m = *e.m;
    m.eval(prompt.data(), 12, 0, lg.data());
    CHECK(same(lg, want[0]));
    const int32_t branch[4] = {cont[0], 50, 51, 52};
    std::vector<float> w(static_cast<size_t>(4) * V);
    m.eval(branch, 4, 12, LogitRows::All, w.data(), 1);
    CHECK(std::memcmp(w.data(), want[1].data(), V * sizeof(float)) == 0);
    m.mtp_draft(nullptr, 3, 15, 3, nullptr, dt.data());
    m.rollback(13);
    CHECK(m.mtp_cell_valid(11));
    CHECK(!m.mtp_cell_valid(13));
    for (int s = 1; s < steps; ++s) {
      m.eval(&cont[s], 1, 12 + s, lg.data());
      CHECK_MSG(same(lg, want[static_cast<size_t>(s + 1)]), "after rollback, step " + std::to_string(s));
    }
    m.mtp_draft(nullptr, cont[3], 14, 3, dl.data(), dt.data());
    CHECK(same(dl, dl_want));
    CHECK(dt == dt_want);
    // The last draft row read exactly the sink and the W + 1 window cells.
    std::vector<int32_t> expect = {0, 1};
    for (int c = 16 - kWin; c <= 16; ++c) expect.push_back(c);
    if (m.last_draft_row_cells() != expect)
      for (int32_t c : m.last_draft_row_cells()) std::printf("cell %d\n", c);
    CHECK(m.last_draft_row_cells() == expect);
  }
  // Restore: a checkpoint after the prompt, a diverging branch with drafts, restore, re-feed the last
  // prompt token (the drafter cell it completes was rewritten by the branch), continue.
  {
    Emu e(o, 5, 96, backend);
    Sequence& m = *e.m;
    m.eval(prompt.data(), 12, 0, lg.data());
    const strata::engine::SequenceCheckpoint cp = m.checkpoint();
    const int32_t branch[3] = {44, 45, 46};
    m.eval(branch, 3, 12, nullptr);
    m.mtp_draft(nullptr, 8, 14, 3, nullptr, dt.data());
    m.restore(cp);
    CHECK_EQ(m.n_past(), int64_t{12});
    CHECK(m.mtp_cell_valid(10));
    CHECK(!m.mtp_cell_valid(11));  // re-encoded by the branch with another next token: cut
    const int32_t refeed[2] = {prompt[11], cont[0]};
    m.eval(refeed, 2, 11, lg.data());
    CHECK(same(lg, want[1]));
    for (int s = 1; s < steps; ++s) {
      m.eval(&cont[s], 1, 12 + s, lg.data());
      CHECK_MSG(same(lg, want[static_cast<size_t>(s + 1)]), "after restore, step " + std::to_string(s));
    }
    m.mtp_draft(nullptr, cont[3], 14, 3, dl.data(), dt.data());
    CHECK(same(dl, dl_want));
    CHECK(dt == dt_want);
    // A checkpoint whose cells were rewritten since is refused.
    const strata::engine::SequenceCheckpoint late = m.checkpoint();
    m.rollback(8);
    m.eval(branch, 3, 8, nullptr);
    CHECK_THROWS(m.restore(late));
    CHECK_EQ(e.violations(), uint64_t{0});
  }
}

TEST(rollback_and_restore_then_continue_equal_a_fresh_run) {
  for (const char* b : kBackends) rollback_and_restore_then_continue_equal_a_fresh_run_on(b);
}

void draft_rows_follow_draft_cells_and_the_ledger_on(const char* backend) {
  std::printf("backend %s\n", backend);
  TinyOptions o;
  o.seed = 23;
  Emu e(o, 5, 96, backend);
  Sequence& m = *e.m;
  const int V = e.V();
  const auto prompt = prompt_of(14, V, 1);
  m.eval(prompt.data(), 14, 0, nullptr);
  CHECK_EQ(m.draft_cells().run_begin(), 0);
  CHECK_EQ(m.draft_cells().run_end(), 13);  // rows 0..12 encoded; row 13 waits for its next token
  CHECK_EQ(m.draft_cells().sink_end(), kSink);
  CHECK_THROWS(m.draft_step(nullptr));  // no chain
  CHECK_THROWS(m.set_draft_token(2));   // no chain step to replace the token of
  CHECK_THROWS(m.draft_begin(5, 3));    // streams of 5 are not held
  m.draft_begin(13, 4);
  CHECK_THROWS(m.set_draft_token(2));  // no step yet
  m.draft_step(nullptr);
  CHECK_THROWS(m.set_draft_token(V));  // outside the vocabulary
  CHECK_THROWS(m.set_draft_token(-1));
  CHECK_EQ(m.draft_cells().run_end(), 14);  // step 0 wrote cell 13's committed K/V
  m.draft_step(nullptr);                    // chain step 1 at cell 14: reads chain cell 14 itself
  std::vector<int32_t> expect = {0, 1};
  for (int c = 14 - kWin; c <= 14; ++c) expect.push_back(c);
  CHECK(m.last_draft_row_cells() == expect);
  CHECK_EQ(m.draft_cells().run_end(), 14);  // chain cells are not reported
  // The verification eval from 14 re-encodes cell 13 from the held streams of 13 (token at 14) and
  // encodes cell 14: the chain cell is replaced by committed K/V.
  const int32_t other[2] = {4, 9};
  m.eval(other, 2, 14, nullptr);
  CHECK_EQ(m.draft_cells().run_end(), 15);
  // A plain step (no draft round before it) keeps the run: cell 15 is re-encoded, nothing is lost.
  const int32_t plain = 3;
  m.eval(&plain, 1, 16, nullptr);
  CHECK_EQ(m.draft_cells().run_begin(), 0);
  CHECK_EQ(m.draft_cells().run_end(), 16);
  CHECK(m.draft_ready(16));
  CHECK(!m.draft_ready(14));
  // Rollback into the prompt; feeding a different token at 10 without the streams of 9 drops cell 9.
  m.rollback(10);
  CHECK(m.mtp_cell_valid(9));
  const int32_t t10 = (prompt[10] + 1) % V;
  m.eval(&t10, 1, 10, nullptr);
  CHECK(!m.mtp_cell_valid(9));
  CHECK(m.mtp_cell_valid(8));
  // The next draft chain restarts the run at its first row: it reads the sink and itself only.
  m.draft_begin(10, 5);
  m.draft_step(nullptr);
  CHECK((m.last_draft_row_cells() == std::vector<int32_t>{0, 1, 10}));
  std::printf("ledger: %llu draft rows, %llu cell reads checked\n",
              static_cast<unsigned long long>(m.ledger().rows_checked()),
              static_cast<unsigned long long>(m.ledger().reads_checked()));
  CHECK_EQ(m.ledger().rows_checked(), uint64_t{3});
  CHECK_EQ(e.violations(), uint64_t{0});
}

TEST(draft_rows_follow_draft_cells_and_the_ledger) {
  for (const char* b : kBackends) draft_rows_follow_draft_cells_and_the_ledger_on(b);
}

TEST(cell_ledger_catches_stale_and_foreign_reads) {
  strata::engine::CellLedger g(16);
  for (int x = 0; x < 8; ++x) g.main_wrote(x, 10 + x);
  for (int c = 0; c < 6; ++c) g.drafter_committed(c, 10 + c + 1);  // cell c with token t_{c+1}
  g.drafter_committed(7, 99);                                      // cell 7 (= p) with the pending token
  const strata::engine::CellLedger::Chain chain{7, 99, 5};
  g.drafter_chain(8, 5);
  const std::vector<int32_t> ok = {0, 1, 4, 5, 7, 8, 9};
  g.check_draft_row(ok, 9, chain, 8);
  const std::vector<int32_t> unencoded = {0, 6, 7};  // cell 6 never encoded
  CHECK_THROWS(g.check_draft_row(unencoded, 7, chain, 8));
  const strata::engine::CellLedger::Chain other{7, 98, 5};  // cell 7 was encoded with another next token
  const std::vector<int32_t> seven = {7, 8};
  CHECK_THROWS(g.check_draft_row(seven, 8, other, 8));
  const strata::engine::CellLedger::Chain later{7, 99, 6};  // chain cell 8 belongs to round 5
  CHECK_THROWS(g.check_draft_row(seven, 9, later, 8));
  g.main_wrote(3, 77);  // the main sequence diverged at 3: committed cells 2.. are stale now
  const std::vector<int32_t> before = {0, 1};
  g.check_draft_row(before, 7, chain, 8);
  const std::vector<int32_t> stale = {0, 2};
  CHECK_THROWS(g.check_draft_row(stale, 7, chain, 8));
  try {
    g.check_draft_row(stale, 7, chain, 8);
  } catch (const strata::Error& err) {
    CHECK(err.kind() == strata::ErrorKind::Internal);
  }
}

TEST(speculative_greedy_equals_plain_greedy_and_cpu) {
  TinyOptions o;
  o.seed = 24;
  const int n_new = 11;
  const auto prompt = prompt_of(9, 61, 2);
  Emu plain(o), spec(o);
  const Decoded a = greedy(*plain.m, prompt, n_new, 0);
  const Decoded b = greedy(*spec.m, prompt, n_new, 3, &a.tokens);
  // The CPU backend, plain greedy.
  strata::engine::RunnerConfig rc;
  rc.n_threads = 1;
  rc.max_ctx = 96;
  rc.encode_mtp = false;
  strata::engine::Runner cpu(strata_test::tiny_model(o), rc);
  std::vector<float> lc(static_cast<size_t>(cpu.hparams().n_vocab));
  std::vector<int32_t> c;
  cpu.eval(prompt.data(), static_cast<int64_t>(prompt.size()), 0, LogitRows::Last, lc.data());
  while (static_cast<int>(c.size()) < n_new) {
    const int32_t t = argmax(lc.data(), static_cast<int>(lc.size()));
    c.push_back(t);
    cpu.eval(&t, 1, cpu.n_past(), LogitRows::Last, lc.data());
  }
  std::printf("speculative greedy on metal-emu: %d rounds, %d drafted, %d accepted; tokens %s plain, plain %s CPU\n",
              b.rounds, b.drafted, b.accepted, a.tokens == b.tokens ? "==" : "!=", a.tokens == c ? "==" : "!=");
  CHECK(a.tokens == b.tokens);
  CHECK(a.tokens == c);
  CHECK(b.rounds > 0);
  CHECK(b.accepted >= 3);  // windows that kept drafts, not only rejections
  CHECK(spec.m->ledger().rows_checked() >= static_cast<uint64_t>(b.drafted));
  CHECK_EQ(spec.violations(), uint64_t{0});
}

namespace {

// The first token after a prompt, then Speculator rounds until n tokens.
std::vector<int32_t> speculate(DecodeTarget& t, const std::vector<int32_t>& prompt, int n,
                               const strata::draft::RoundOptions& opt, int* drafted) {
  strata::draft::Speculator spec(t, 4);
  std::vector<float> lg(static_cast<size_t>(t.n_vocab()));
  t.eval(prompt.data(), static_cast<int64_t>(prompt.size()), 0, LogitRows::Last, lg.data(), -1);
  strata::sampling::Rng rng(7);
  std::vector<int32_t> out = {argmax(lg.data(), t.n_vocab())};
  while (static_cast<int>(out.size()) < n) {
    const strata::draft::RoundResult r = spec.round(out.back(), {}, opt, rng);
    *drafted += r.drafted;
    for (int i = 0; i < r.n_tokens; ++i) out.push_back(r.tokens[i]);
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

TEST(speculator_on_metal_equals_cpu_runner) {
  TinyOptions o;
  o.seed = 25;
  const auto prompt = prompt_of(11, 61, 4);
  strata::draft::RoundOptions opt;
  opt.max_drafts = 3;
  strata::engine::RunnerConfig rc;
  rc.n_threads = 1;
  rc.max_ctx = 96;
  rc.max_rows = 5;
  rc.mtp_sink = kSink;
  rc.mtp_window = kWin;
  strata::engine::Runner cpu(strata_test::tiny_model(o), rc);
  Emu e(o);
  int dc = 0, dm = 0;
  const std::vector<int32_t> tc = speculate(cpu, prompt, 12, opt, &dc);
  const std::vector<int32_t> tm = speculate(*e.m, prompt, 12, opt, &dm);
  std::printf("Speculator, greedy: CPU Runner %d drafts, MetalModel %d drafts; tokens %s\n", dc, dm,
              tc == tm ? "equal" : "differ");
  CHECK(tc == tm);
  CHECK(dm > 0);
  CHECK_EQ(e.violations(), uint64_t{0});
}

void random_session_reads_only_committed_drafter_cells_on(const char* backend) {
  std::printf("backend %s\n", backend);
  TinyOptions o;
  o.seed = 26;
  std::mt19937 g(77);
  Emu e(o, /*max_rows=*/3, /*max_ctx=*/64, backend);
  Sequence& m = *e.m;
  strata::draft::Speculator spec(m, 4);
  const int V = e.V();
  strata::sampling::Rng rng(5);
  std::vector<int32_t> seq;  // committed tokens; seq.back() is pending
  std::vector<strata::engine::SequenceCheckpoint> cps;
  std::vector<size_t> cp_len;
  int rounds = 0, drafted = 0, restores = 0, rollbacks = 0;
  auto feed = [&](int64_t from) {
    m.rollback(from);
    for (int64_t pos = from, end = static_cast<int64_t>(seq.size()) - 1; pos < end;) {
      const int64_t n = std::min<int64_t>(end - pos, 1 + g() % 5);
      m.eval(seq.data() + pos, n, pos, nullptr);
      pos += n;
    }
  };
  auto new_prompt = [&]() {
    seq.clear();
    for (int i = 0, n = 2 + static_cast<int>(g() % 12); i < n; ++i) seq.push_back(static_cast<int32_t>(g() % V));
    cps.clear();
    cp_len.clear();
    feed(0);
  };
  new_prompt();
  for (int step = 0; step < 36; ++step) {
    const auto act = g() % 100;
    if (static_cast<int64_t>(seq.size()) >= m.max_ctx() - 6 || act < 4) {
      new_prompt();
    } else if (act < 14 && seq.size() > 3) {
      const size_t keep = 1 + g() % (seq.size() - 2);
      seq.resize(keep + 1);
      if (g() % 2) seq.back() = static_cast<int32_t>(g() % V);
      feed(std::min<int64_t>(static_cast<int64_t>(keep), m.n_past()));
      cps.clear();
      cp_len.clear();
      ++rollbacks;
    } else if (act < 22) {
      cps.push_back(m.checkpoint());
      cp_len.push_back(seq.size());
    } else if (act < 30 && !cps.empty()) {
      try {
        m.restore(cps.back());
        seq.resize(cp_len.back());
        ++restores;
      } catch (const strata::Error&) {
        // stale: refused, the model unchanged
      }
      cps.pop_back();
      cp_len.pop_back();
    } else {
      strata::draft::RoundOptions opt;
      opt.max_drafts = 1 + static_cast<int>(g() % 4);
      opt.chained = g() % 2;
      opt.policy.temperature = g() % 2 ? 0.0f : 0.9f;
      const strata::draft::RoundResult r = spec.round(seq.back(), {}, opt, rng);
      for (int i = 0; i < r.n_tokens; ++i) seq.push_back(r.tokens[i]);
      CHECK_EQ(m.n_past(), static_cast<int64_t>(seq.size()) - 1);
      ++rounds;
      drafted += r.drafted;
    }
  }
  std::printf(
      "random %s session: %d rounds (%d drafter rows), %d rollbacks, %d restores; ledger checked %llu "
      "rows, %llu reads\n",
      backend, rounds, drafted, rollbacks, restores, static_cast<unsigned long long>(m.ledger().rows_checked()),
      static_cast<unsigned long long>(m.ledger().reads_checked()));
  CHECK(rounds > 15);
  CHECK(drafted > 15);
  CHECK(restores + rollbacks > 2);
  CHECK(m.ledger().rows_checked() == static_cast<uint64_t>(drafted));
  CHECK_EQ(e.violations(), uint64_t{0});
}

TEST(random_session_reads_only_committed_drafter_cells) {
  for (const char* b : kBackends) random_session_reads_only_committed_drafter_cells_on(b);
}
