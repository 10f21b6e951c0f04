// MTP draft cells (the drafter's sink + window cell rule, docs/drafting.md): wrote()'s rules, the draft
// row's cell list, the simulation's streaming-prompt chunk pattern, check_reads, and a randomized simulation (streaming
// prompts of random lengths and chunk sizes, decode rounds with chains, rounds without drafting, rollbacks, checkpoint
// restores, resets, session save/load) against a shadow model of what every cell physically holds, asserting zero reads
// of cells that do not hold committed K/V.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "strata/draft/draft_cells.h"
#include "strata/util/error.h"

using strata::draft::DraftCells;

namespace {

// The streamed-prompt pattern the simulation drives (the library's Sequence encodes every row of
// each chunk; this sparser pattern stresses the bookkeeping harder): a prompt whose tokens end at
// position prompt_end - 1 is fed in chunks, and for the chunk [chunk_begin, chunk_end) the drafter
// encodes, while that chunk's hidden states exist, the sink rows t < sink and the first draft row's
// window rows t >= prompt_end - 1 - window, only rows whose next token is known (t < prompt_end - 1).
// At most two ascending disjoint ranges [begin, end) in out; returns how many.
struct RowRange {
  int32_t begin, end;
};
int prompt_chunk_rows(int32_t chunk_begin, int32_t chunk_end, int32_t prompt_end, int sink, int window,
                      RowRange out[2]) {
  const int32_t last = std::min(chunk_end, prompt_end - 1);  // rows whose next token is known
  int n = 0;
  auto add = [&](int32_t b, int32_t e) {
    b = std::max(b, chunk_begin);
    e = std::min(e, last);
    if (b >= e) return;
    if (n > 0 && b <= out[n - 1].end) {
      out[n - 1].end = std::max(out[n - 1].end, e);
      return;
    }
    out[n++] = RowRange{b, e};
  };
  add(0, sink);
  add(prompt_end - 1 - window, last);
  return n;
}

}  // namespace

TEST(wrote_rules) {
  DraftCells d(4, 8);
  d.wrote(0, 3);
  CHECK_EQ(d.sink_end(), 3);
  CHECK_EQ(d.run_begin(), 0);
  CHECK_EQ(d.run_end(), 3);
  d.wrote(3, 10);  // contiguous: run grows, sink fills to its size
  CHECK_EQ(d.sink_end(), 4);
  CHECK_EQ(d.run_end(), 13);
  d.wrote(20, 2);  // gap: the run restarts, the sink stays
  CHECK_EQ(d.run_begin(), 20);
  CHECK_EQ(d.run_end(), 22);
  CHECK_EQ(d.sink_end(), 4);
  CHECK(!d.valid(15));
  d.wrote(21, 1);  // a write inside the run cuts what lay past it
  CHECK_EQ(d.run_end(), 22);
  d.wrote(21, 0);  // n = 0: marks stale only
  CHECK_EQ(d.run_end(), 21);
  d.wrote(2, 1);  // before the run: sink cut to 2 then extended to 3, run restarts at 2
  CHECK_EQ(d.sink_end(), 3);
  CHECK_EQ(d.run_begin(), 2);
  CHECK_EQ(d.run_end(), 3);
  CHECK(!d.valid(20));
  d.wrote(2, 0);
  CHECK_EQ(d.sink_end(), 2);
  CHECK_EQ(d.run_end(), 0);  // empty run
  d.wrote(0, 12);
  d.wrote(13, 0);  // a stale mark past the run (a pass feeding from 13) keeps it whole
  CHECK_EQ(d.run_begin(), 0);
  CHECK_EQ(d.run_end(), 12);
  CHECK_EQ(d.sink_end(), 4);
  d.wrote(12, 0);
  CHECK_EQ(d.run_end(), 12);
  d.wrote(0, 30);
  d.reset();
  CHECK_EQ(d.sink_end(), 0);
  CHECK_EQ(d.run_end(), 0);
  CHECK(!d.valid(0));
  d.wrote(0, 30);
  d.load();
  CHECK(!d.valid(5));
  CHECK_THROWS(d.wrote(-1, 2));
  CHECK_THROWS(DraftCells(1025, 8));
  CHECK_THROWS(DraftCells(0, 2052));
  CHECK_THROWS(DraftCells(0, 0));
}

TEST(draft_row_cell_list) {
  DraftCells d(64, 256);
  std::vector<int32_t> cells;
  CHECK_THROWS(d.draft_row_cells(10, cells));  // no run yet
  d.wrote(0, 1000);
  // [0 .. min(sink, first) - 1] ++ [first .. pos], first = pos - 256: 64 + 257 = 321 cells
  CHECK_EQ(d.draft_row_cells(999, cells), 321);
  CHECK_EQ(d.max_row_cells(), 321);
  CHECK_EQ(cells[63], 63);
  CHECK_EQ(cells[64], 743);
  CHECK_EQ(cells.back(), 999);
  d.check_reads(cells, 999);
  // Short history: the sink and the window overlap, no duplicates.
  DraftCells s(64, 256);
  s.wrote(0, 100);
  CHECK_EQ(s.draft_row_cells(99, cells), 100);
  for (int i = 0; i < 100; ++i) CHECK_EQ(cells[static_cast<size_t>(i)], i);
  // A chain step past the run reads this round's chain cells.
  CHECK_EQ(s.draft_row_cells(101, cells), 102);
  s.check_reads(cells, 101, 2);
  CHECK_THROWS(s.check_reads(cells, 101, 0));  // a first draft row must be the last committed row
  // A restarted run after a gap: only the sink prefix and the run.
  DraftCells g(4, 8);
  g.wrote(0, 2);
  g.wrote(50, 3);
  CHECK_EQ(g.draft_row_cells(52, cells), 5);
  CHECK((cells == std::vector<int32_t>{0, 1, 50, 51, 52}));
  CHECK_THROWS(g.draft_row_cells(49, cells));
  // check_reads catches stale, unordered, duplicate and future cells.
  const std::vector<int32_t> stale = {0, 1, 2, 50};
  CHECK_THROWS(g.check_reads(stale, 52));
  const std::vector<int32_t> dup = {0, 50, 50};
  CHECK_THROWS(g.check_reads(dup, 52));
  const std::vector<int32_t> future = {50, 53};
  CHECK_THROWS(g.check_reads(future, 52));
  g.check_reads(cells, 52);
  g.wrote(51, 0);  // cells past 51 are stale now: the old list no longer passes
  CHECK_THROWS(g.check_reads(cells, 52, 1));
  CHECK_THROWS(g.check_reads(cells, 52));
  // Sink off.
  DraftCells z(0, 8);
  z.wrote(0, 100);
  CHECK_EQ(z.draft_row_cells(99, cells), 9);
  CHECK_EQ(cells.front(), 91);
}

TEST(prompt_chunk_rule) {
  RowRange r[2];
  // 1000-token prompt in chunks of 512, sink 64, window 256: first chunk encodes the sink rows,
  // the second the window rows [743, 999) (row 999 is the first draft row, encoded after sampling).
  CHECK_EQ(prompt_chunk_rows(0, 512, 1000, 64, 256, r), 1);
  CHECK_EQ(r[0].begin, 0);
  CHECK_EQ(r[0].end, 64);
  CHECK_EQ(prompt_chunk_rows(512, 1000, 1000, 64, 256, r), 1);
  CHECK_EQ(r[0].begin, 743);
  CHECK_EQ(r[0].end, 999);
  // A short last chunk: the window reaches into the previous chunk, which encodes its part.
  CHECK_EQ(prompt_chunk_rows(512, 1024, 1100, 64, 256, r), 1);
  CHECK_EQ(r[0].begin, 843);
  CHECK_EQ(r[0].end, 1024);
  CHECK_EQ(prompt_chunk_rows(1024, 1100, 1100, 64, 256, r), 1);
  CHECK_EQ(r[0].begin, 1024);
  CHECK_EQ(r[0].end, 1099);
  // One chunk holding both: two ranges, or one when they meet.
  CHECK_EQ(prompt_chunk_rows(0, 512, 300, 64, 256, r), 1);
  CHECK_EQ(r[0].begin, 0);
  CHECK_EQ(r[0].end, 299);
  CHECK_EQ(prompt_chunk_rows(0, 512, 400, 64, 256, r), 2);
  CHECK_EQ(r[0].end, 64);
  CHECK_EQ(r[1].begin, 143);
  CHECK_EQ(r[1].end, 399);
  CHECK_EQ(prompt_chunk_rows(100, 200, 1000, 64, 256, r), 0);
}

namespace {

uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

struct Content {
  uint64_t conv = 0;  // 0: never written
  uint64_t key = 0;
  bool operator==(const Content&) const = default;
};

// A stand-in for the engine driving DraftCells by the documented protocol, with a shadow of every
// cell's physical content. Committed K/V of cell x = (conversation, hash of tokens 0..x+1).
struct Sim {
  std::mt19937_64 rng;
  int S, W;
  bool protocol_main_pass;  // call wrote(p0, 0) before each main pass (the documented protocol)
  DraftCells dc;
  std::vector<Content> cells;
  uint64_t conv = 0, next_conv = 1, round = 0;
  std::vector<int32_t> T;
  std::vector<uint64_t> ph{0x1234};
  int32_t fed = 0;
  int32_t pend0 = 0, pend1 = 0;  // committed rows with hidden states available, not yet encoded
  int32_t h0 = 0, h1 = 0;        // positions whose main hidden states exist now
  struct Saved {
    uint64_t conv;
    std::vector<int32_t> T;
    std::vector<Content> cells;
  };
  std::vector<Saved> saved;
  std::vector<std::vector<int32_t>> checkpoints;
  std::vector<int32_t> list;
  // stats
  long rounds = 0, draft_rows = 0, reads = 0, bad_reads = 0, bad_valid = 0, check_throws = 0, prompts = 0,
       rollbacks = 0, restores = 0, resets = 0, loads = 0, chunks = 0;
  double coverage_sum = 0.0;

  bool steady = false;  // only drafting rounds, prompts and resets: nothing drops committed cells

  Sim(uint64_t seed, int sink, int window, bool protocol)
      : rng(seed), S(sink), W(window), protocol_main_pass(protocol), dc(sink, window), cells(4096) {}

  int rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  void push(int32_t t) {
    T.push_back(t);
    ph.push_back(mix(ph.back(), static_cast<uint64_t>(t)));
  }
  void truncate(size_t L) {
    T.resize(L);
    ph.resize(L + 1);
  }
  Content committed(int32_t x) const { return Content{conv, ph[static_cast<size_t>(x) + 2]}; }
  Content chain(int j) const { return Content{conv, mix(0xC4A1F00DULL ^ round, static_cast<uint64_t>(j))}; }

  void main_pass(int32_t p0) {
    if (protocol_main_pass) dc.wrote(p0, 0);
  }
  void encode(int32_t b, int32_t e) {
    if (b >= e) return;
    for (int32_t x = b; x < e; ++x) {
      // The driver only encodes what an engine could: hidden state present, next token committed.
      if (!(x >= h0 && x < h1 && static_cast<size_t>(x) + 1 < T.size())) {
        std::fprintf(stderr, "simulation driver bug: encode %d (h [%d,%d), L %zu)\n", x, h0, h1, T.size());
        ++bad_valid;
        return;
      }
      cells[static_cast<size_t>(x)] = committed(x);
    }
    dc.wrote(b, e - b);
  }

  // Feeds `tokens` (appended to T) in chunks, encoding what the chunk rule says, then samples `next`.
  void prompt(const std::vector<int32_t>& tokens, int32_t next, int chunk) {
    ++prompts;
    // Rows still waiting (e.g. the first draft row of a prompt that was never drafted from) are encoded
    // while their hidden states exist; the mixed simulation sometimes drops them instead.
    if (pend0 < pend1 && (steady || rand(0, 1))) encode(pend0, pend1);
    for (int32_t t : tokens) push(t);
    const int32_t N = static_cast<int32_t>(T.size());
    const int32_t p0 = fed;
    main_pass(p0);
    pend0 = pend1 = 0;
    for (int32_t a = p0; a < N; a += chunk) {
      const int32_t b = std::min(N, a + chunk);
      h0 = a;
      h1 = b;  // only this chunk's hidden states exist now
      ++chunks;
      RowRange r[2];
      const int n = prompt_chunk_rows(a, b, N, S, W, r);
      for (int i = 0; i < n; ++i) encode(r[i].begin, r[i].end);
    }
    fed = N;
    push(next);
    pend0 = N - 1;
    pend1 = N;
  }

  void check_valid_set() {
    const int32_t top = std::max(dc.sink_end(), dc.run_end());
    for (int32_t x = 0; x < top; ++x) {
      if (!dc.valid(x)) continue;
      if (static_cast<size_t>(x) + 2 > T.size() || !(cells[static_cast<size_t>(x)] == committed(x))) {
        ++bad_valid;
        return;
      }
    }
  }

  void check_row(int32_t c, int32_t pos) {
    ++draft_rows;
    dc.draft_row_cells(pos, list);
    try {
      dc.check_reads(list, pos, pos - c);
    } catch (const strata::Error&) {
      ++check_throws;
    }
    long good = 0;
    for (int32_t x : list) {
      ++reads;
      const Content want = x <= c ? committed(x) : chain(x - c);
      if (cells[static_cast<size_t>(x)] == want)
        ++good;
      else
        ++bad_reads;
    }
    // Coverage: how much of what a perfect tracker could read this row reads.
    const int32_t first = std::max(0, pos - W);
    long ideal = 0;
    auto ok = [&](int32_t x) { return cells[static_cast<size_t>(x)] == (x <= c ? committed(x) : chain(x - c)); };
    for (int32_t x = 0; x < std::min(S, first); ++x) ideal += ok(x);
    for (int32_t x = first; x <= pos; ++x) ideal += ok(x);
    coverage_sum += ideal > 0 ? static_cast<double>(good) / static_cast<double>(ideal) : 1.0;
  }

  void decode_round(bool drafting, int kmax) {
    ++rounds;
    ++round;
    const int32_t L = static_cast<int32_t>(T.size());
    int k = 0;
    if (drafting && pend1 == L - 1 && pend0 < pend1) {
      encode(pend0, pend1);
      check_valid_set();
      const int32_t c = L - 2;
      k = rand(1, kmax);
      check_row(c, c);
      for (int j = 1; j < k; ++j) {
        cells[static_cast<size_t>(c + j)] = chain(j);  // speculative chain cells: no wrote()
        check_row(c, c + j);
      }
    }
    // Verification pass over positions [L-1, L+k).
    main_pass(L - 1);
    const int a = rand(0, k);
    for (int i = 0; i < a; ++i) push(rand(0, 40));
    push(rand(0, 40));
    fed = static_cast<int32_t>(T.size()) - 1;
    h0 = L - 1;
    h1 = L + k;
    pend0 = L - 1;
    pend1 = fed;  // rows [L-1, L'-1) have committed inputs and next tokens
  }

  void rollback(int32_t L) {
    ++rollbacks;
    truncate(static_cast<size_t>(L));
    fed = L - 1;
    pend0 = pend1 = 0;
    h0 = h1 = 0;
  }

  std::vector<int32_t> random_tokens(int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = rand(0, 40);
    return v;
  }
  int random_chunk() {
    const int cs[7] = {1, 7, 64, 100, 256, 512, 333};
    return cs[rand(0, 6)];
  }

  void new_conversation() {
    ++resets;
    conv = next_conv++;
    truncate(0);
    fed = 0;
    dc.reset();
    checkpoints.clear();
    pend0 = pend1 = h0 = h1 = 0;
    prompt(random_tokens(rand(1, 900)), rand(0, 40), random_chunk());
  }

  void restore(const std::vector<int32_t>& cp) {
    ++restores;
    size_t q = 0;
    while (q < cp.size() && q < T.size() && cp[q] == T[q]) ++q;
    if (q == cp.size()) {  // a shorter prefix of the current tokens: a rollback
      if (cp.size() < T.size()) rollback(static_cast<int32_t>(cp.size()));
      return;
    }
    // Diverged below the checkpoint: keep the common prefix, re-feed the rest.
    if (q == 0) {
      truncate(0);
      fed = 0;
    } else {
      rollback(static_cast<int32_t>(q));
    }
    std::vector<int32_t> rest(cp.begin() + static_cast<std::ptrdiff_t>(q), cp.end() - 1);
    if (q == 0 && rest.empty()) rest.push_back(cp[0]);  // never feed nothing
    if (q == 0 && cp.size() == 1) return;
    prompt(rest, cp.back(), random_chunk());
  }

  void step() {
    if (T.size() > 3000) {
      new_conversation();
      return;
    }
    const int op = rand(0, 99);
    if (op < 62) {
      decode_round(true, rand(1, 6));
    } else if (op < 70) {
      decode_round(steady, steady ? rand(1, 6) : 1);  // drafting off this round: pending rows are lost
    } else if (op < 77) {
      prompt(random_tokens(rand(1, 700)), rand(0, 40), random_chunk());
    } else if (steady && op < 95) {
      decode_round(true, rand(1, 6));
    } else if (op < 83) {
      if (T.size() >= 2) rollback(rand(1, static_cast<int>(T.size()) - 1));
    } else if (op < 87) {
      if (T.size() >= 2) checkpoints.push_back(T);
    } else if (op < 92) {
      if (!checkpoints.empty())
        restore(checkpoints[static_cast<size_t>(rand(0, static_cast<int>(checkpoints.size()) - 1))]);
    } else if (op < 95) {
      new_conversation();
    } else if (op < 97) {
      saved.push_back(Saved{conv, T, cells});
      if (saved.size() > 4) saved.erase(saved.begin());
    } else if (!saved.empty() && !steady) {
      ++loads;
      const Saved& s = saved[static_cast<size_t>(rand(0, static_cast<int>(saved.size()) - 1))];
      conv = s.conv;
      truncate(0);
      for (int32_t t : s.T) push(t);
      if (rand(0, 1)) cells = s.cells;  // MTP cells restored or not: the bookkeeping is cleared anyway
      fed = static_cast<int32_t>(T.size()) - 1;
      dc.load();
      checkpoints.clear();
      pend0 = pend1 = h0 = h1 = 0;
    }
  }
};

}  // namespace

void run_sims(bool steady, int steps) {
  struct Cfg {
    int sink, window;
  };
  const Cfg cfgs[] = {{64, 256}, {0, 256}, {4, 8}, {16, 32}, {1024, 2051}, {3, 1}, {64, 64}, {128, 16}};
  long total_rounds = 0, total_reads = 0, total_rows = 0, total_bad = 0;
  for (size_t i = 0; i < std::size(cfgs); ++i) {
    Sim sim(1000 + i + (steady ? 500 : 0), cfgs[i].sink, cfgs[i].window, true);
    sim.steady = steady;
    sim.new_conversation();
    for (int s = 0; s < steps; ++s) sim.step();
    const double cov = sim.coverage_sum / static_cast<double>(std::max(1L, sim.draft_rows));
    std::printf(
        "%s sink %4d win %4d: %ld decode rounds, %ld draft rows, %ld reads, %ld prompts (%ld chunks), "
        "%ld rollbacks, %ld restores, %ld resets, %ld loads; bad reads %ld, stale cells in the valid set "
        "%ld, check_reads throws %ld; coverage %.4f\n",
        steady ? "steady" : "mixed ", cfgs[i].sink, cfgs[i].window, sim.rounds, sim.draft_rows, sim.reads, sim.prompts,
        sim.chunks, sim.rollbacks, sim.restores, sim.resets, sim.loads, sim.bad_reads, sim.bad_valid, sim.check_throws,
        cov);
    CHECK_EQ(sim.bad_reads, 0L);
    CHECK_EQ(sim.bad_valid, 0L);
    CHECK_EQ(sim.check_throws, 0L);
    // With nothing dropping cells the tracker reads everything a perfect one could; otherwise it is
    // conservative (one run: gaps, loads, rollbacks below a restarted run drop older valid cells).
    if (steady)
      CHECK(cov > 0.999999);
    else
      CHECK(cov > 0.5);
    CHECK(sim.resets > 50 && sim.prompts > 500);
    if (!steady) CHECK(sim.rollbacks > 100 && sim.restores > 50 && sim.loads > 20);
    total_rounds += sim.rounds;
    total_reads += sim.reads;
    total_rows += sim.draft_rows;
    total_bad += sim.bad_reads;
  }
  std::printf("%s total: %ld decode rounds, %ld draft rows, %ld cell reads, %ld bad\n", steady ? "steady" : "mixed ",
              total_rounds, total_rows, total_reads, total_bad);
  CHECK(total_rounds > 40000);
}

TEST(randomized_simulation_zero_bad_reads) { run_sims(false, 12000); }

TEST(randomized_simulation_steady_full_coverage) { run_sims(true, 10000); }

TEST(simulation_is_sensitive_without_the_main_pass_rule) {
  // Without wrote(p0, 0) before each main pass, a rollback followed by rounds that do not encode (or a
  // long prompt that skips rows) leaves stale cells inside the run: the shadow model sees the bad reads.
  long bad = 0;
  for (int i = 0; i < 4; ++i) {
    Sim sim(77 + static_cast<uint64_t>(i), 4, 16, false);
    sim.new_conversation();
    for (int s = 0; s < 9000; ++s) sim.step();
    bad += sim.bad_reads + sim.bad_valid;
  }
  std::printf("without the main-pass rule: %ld bad reads / stale valid cells\n", bad);
  CHECK(bad > 0);
}
