// ExpertStore and LayerPass: capacity → slots, hits/misses/evictions in LRU order, resident-first
// order, pinning (a layer that needs more experts than there are slots still gets every expert
// right), counters, the residency map, faults surfacing as errors with the store left consistent,
// mmap mode, and a randomized stress run with I/O threads checking every byte a view exposes.
// GCC cannot see that the replaced operator new below pairs with the replaced delete.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
#define STRATA_TEST_MAIN
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <random>
#include <chrono>
#include <set>
#include <thread>

#include "check.h"
#include "strata/experts/expert_store.h"
#include "strata/util/error.h"
#include "strata/util/mmap_file.h"
#include "test_expert_fixture.h"

// Counts heap allocations so the per-token path can be shown to allocate nothing.
static std::atomic<long> g_allocs{0};
void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace strata;
using namespace strata::experts;
using strata_test::make_layout;
using strata_test::TempFile;
using strata_test::view_matches;

namespace {

constexpr int kL = 3, kE = 8, kRows = 4, kCols = 16;

struct Fixture {
  uint64_t size = 0;
  std::unique_ptr<TempFile> file;
  ExpertLayout layout;
  Fixture() {
    make_layout("", kL, kE, kRows, kCols, &size);
    file = std::make_unique<TempFile>(size);
    layout = make_layout(file->path(), kL, kE, kRows, kCols, &size);
  }
  std::unique_ptr<ExpertStore> stream(int64_t slots, int io_threads, DirectIo d = DirectIo::Auto,
                                      Prefetch p = Prefetch::Auto) {
    ExpertStoreConfig c;
    c.mode = ExpertMode::Stream;
    c.io_threads = io_threads;
    c.direct_io = d;
    c.prefetch = p;
    auto probe = std::make_unique<ExpertStore>(layout, c);
    c.cache_bytes = static_cast<uint64_t>(slots) * probe->slot_bytes();
    return std::make_unique<ExpertStore>(layout, c);
  }
};

model::MoeWeights weights_of(const ExpertLayout& lay, int layer) {
  model::MoeWeights w;
  w.gate = lay.layers[static_cast<std::size_t>(layer)].part[0].view;
  w.up = lay.layers[static_cast<std::size_t>(layer)].part[1].view;
  w.down = lay.layers[static_cast<std::size_t>(layer)].part[2].view;
  return w;
}

// Runs one layer pass over `experts`; returns the compute order and checks every view's bytes.
std::vector<int> run_pass(ExpertStore& st, int layer, const std::vector<int>& experts, bool* ok = nullptr) {
  std::vector<int32_t> count(kE, 0), order(kE, -1);
  for (int e : experts) count[static_cast<std::size_t>(e)] += 1;
  const model::MoeWeights w = weights_of(st.layout(), layer);
  LayerPass pass(&st, layer, w, count.data(), kE, order.data());
  std::vector<int> seen;
  bool good = true;
  int expect_begin = 0;
  while (pass.next_batch()) {
    good = good && pass.batch_begin() == expect_begin && pass.batch_end() > pass.batch_begin();
    expect_begin = pass.batch_end();
    for (int j = pass.batch_begin(); j < pass.batch_end(); ++j) {
      const int e = pass.order()[j];
      seen.push_back(e);
      const ExpertView v = pass.view(j);
      const ExpertLayer& lay = st.layout().layers[static_cast<std::size_t>(layer)];
      good = good && view_matches(v.gate, lay.part[0], e) && view_matches(v.up, lay.part[1], e) &&
             view_matches(v.down, lay.part[2], e);
    }
  }
  good = good && expect_begin == pass.size();
  CHECK(good);
  if (ok) *ok = good;
  return seen;
}

int key(int layer, int e) { return layer * kE + e; }

// Buffered reads of (layer, expert)'s part fail with EIO (the store must read with DirectIo::Off: each
// read then starts at its expert's bytes); every other read goes through.
void fail_reads_of(ExpertStore& st, int layer, int part, int expert) {
  const ExpertTensor& bad = st.layout().layers[static_cast<std::size_t>(layer)].part[part];
  const uint64_t bad_off = bad.file_offset + static_cast<uint64_t>(expert) * bad.view.expert_stride;
  st.reader()->set_pread_hook([bad_off](int fd, void* buf, std::size_t n, uint64_t off, bool) -> ssize_t {
    if (off == bad_off) {
      errno = EIO;
      return -1;
    }
    return ::pread(fd, buf, n, static_cast<off_t>(off));
  });
}

// A pass of `layer` over `experts` that predicts `want` for layer + 1 right after it opens (as the engine
// does); returns the reads the prediction started.
int pass_predicting(ExpertStore& st, int layer, const std::vector<int>& experts, const std::vector<int>& want) {
  std::vector<int32_t> count(kE, 0), order(kE, -1);
  for (int e : experts) count[static_cast<std::size_t>(e)] += 1;
  LayerPass pass(&st, layer, weights_of(st.layout(), layer), count.data(), kE, order.data());
  std::vector<uint8_t> w(kE, 0);
  for (int e : want) w[static_cast<std::size_t>(e)] = 1;
  const int started = st.prefetch(layer + 1, w.data());
  while (pass.next_batch()) {}
  return started;
}

}  // namespace

TEST(capacity_to_slots) {
  Fixture f;
  ExpertStoreConfig c;
  c.mode = ExpertMode::Stream;
  ExpertStore all(f.layout, c);  // 0 bytes = every expert
  CHECK_EQ(all.n_slots(), kL * kE);
  CHECK_EQ(all.slot_bytes() % 4096, 0u);
  CHECK(all.slot_bytes() >= f.layout.layers[0].expert_bytes());
  c.cache_bytes = all.slot_bytes() * 5 + 17;
  CHECK_EQ(ExpertStore(f.layout, c).n_slots(), 5);
  c.cache_bytes = all.slot_bytes() * 1000;  // more than the model: clamped
  CHECK_EQ(ExpertStore(f.layout, c).n_slots(), kL * kE);
  c.cache_bytes = 0;
  c.cache_fraction = 0.10;  // ceil(2.4) = 3
  CHECK_EQ(ExpertStore(f.layout, c).n_slots(), 3);
  c.cache_fraction = 0.0;
  c.cache_bytes = all.slot_bytes() - 1;  // holds no expert
  bool threw = false;
  try {
    ExpertStore s(f.layout, c);
  } catch (const Error& e) {
    threw = e.kind() == ErrorKind::Config && std::string(e.what()).find("holds no expert") != std::string::npos;
  }
  CHECK(threw);
  c.cache_bytes = 0;
  c.io_threads = 65;
  CHECK_THROWS(ExpertStore(f.layout, c));
  // A layout without a file cannot stream.
  ExpertLayout nofile = f.layout;
  nofile.has_file_offsets = false;
  c.io_threads = 1;
  CHECK_THROWS(ExpertStore(nofile, c));
  // Ranges outside the file are a format error.
  ExpertLayout past = f.layout;
  past.layers[2].part[2].file_offset = f.size;
  CHECK_THROWS(ExpertStore(past, c));
}

TEST(lru_hits_misses_and_resident_first_order) {
  Fixture f;
  auto st = f.stream(4, 0);
  st->begin_window(1);
  CHECK((run_pass(*st, 0, {2, 1}) == std::vector<int>{1, 2}));
  CHECK((st->lru_keys() == std::vector<int32_t>{key(0, 1), key(0, 2)}));
  run_pass(*st, 1, {3});
  // Layer 0 again: 2 is resident (computed first), 0 and 5 are misses.
  CHECK((run_pass(*st, 0, {0, 5, 2}) == std::vector<int>{2, 0, 5}));
  // 4 slots: loading 0 filled the last free slot, loading 5 evicted the LRU expert (0,1).
  CHECK((st->lru_keys() == std::vector<int32_t>{key(1, 3), key(0, 2), key(0, 0), key(0, 5)}));
  st->end_window();
  const ExpertCounters t = st->totals();
  CHECK_EQ(t.hits, 1u);
  CHECK_EQ(t.misses, 5u);
  CHECK_EQ(t.evictions, 1u);
  CHECK_EQ(t.windows, 1u);
  CHECK_EQ(t.rows, 1u);
  const uint64_t eb = f.layout.layers[0].expert_bytes();
  CHECK_EQ(t.bytes_read, 5 * eb);
  CHECK(t.io_bytes >= t.bytes_read);
  CHECK_EQ(t.prefetch_hits, 5u);  // reads run inline without I/O threads: ready before use
  CHECK_EQ(t.stall_ns, 0u);
  // The residency map follows.
  const uint8_t* m0 = st->resident_map(0);
  CHECK(!m0[1] && m0[0] && m0[2] && m0[5] && !m0[3]);
  CHECK(st->resident_map(1)[3] && !st->resident_map(2)[3]);
  CHECK_EQ(st->resident_count(), 4);
  // last_window is the window's share; a new window starts from zero.
  CHECK_EQ(st->last_window().misses, 5u);
  st->begin_window(3);
  run_pass(*st, 0, {0, 5});
  st->end_window();
  CHECK_EQ(st->last_window().hits, 2u);
  CHECK_EQ(st->last_window().misses, 0u);
  CHECK_EQ(st->last_window().rows, 3u);
  CHECK_EQ(st->totals().hits, 3u);
  st->reset_counters();
  CHECK_EQ(st->totals().hits, 0u);
  st->clear();
  CHECK_EQ(st->resident_count(), 0);
  CHECK(st->lru_keys().empty());
}

// Draft-only experts (not marked in LayerPass's target_used) while keeping them would push the target rows'
// experts out: the store's duel (draft_retention.h) turns to demoting them, and from then on the
// target experts stay resident and a draft-only expert is released as the next one to evict.
TEST(draft_only_experts_are_evicted_first_when_that_reads_less) {
  Fixture f;
  auto st = f.stream(5, 0);
  const model::MoeWeights w0 = weights_of(st->layout(), 0);
  std::vector<int32_t> count(kE, 0), order(kE, -1);
  std::vector<uint8_t> target_used(kE, 0);
  auto pass = [&](int layer, const std::vector<int>& experts, int row) {
    std::fill(count.begin(), count.end(), 0);
    std::fill(target_used.begin(), target_used.end(), 0);
    for (int e : experts) {
      count[static_cast<std::size_t>(e)] = 1;
      target_used[static_cast<std::size_t>(e)] = row == 0 ? 1 : 0;
    }
    LayerPass p(st.get(), layer, weights_of(st->layout(), layer), count.data(), kE, order.data(), target_used.data());
    while (p.next_batch()) {}
  };
  int d = 0;
  uint64_t target_misses_late = 0;
  for (int step = 0; step < 60; ++step) {
    const uint64_t before = st->totals().misses;
    pass(0, {0, 1, 2, 3}, 0);  // the target row's experts
    if (step >= 40) target_misses_late += st->totals().misses - before;
    // Two draft rows' experts in layers 1 and 2, not used again for 8 steps: kept, they push out layer 0's.
    for (int k = 0; k < 2; ++k, ++d) pass(1 + (d / kE) % 2, {d % kE}, 1);
  }
  CHECK(st->demotes_draft_experts());
  CHECK(st->totals().draft_demotions > 0);
  CHECK_EQ(target_misses_late, 0u);  // layer 0's four experts stay resident
  const std::vector<int32_t> lru = st->lru_keys();
  CHECK(!lru.empty() && lru.front() == key(1 + ((d - 1) / kE) % 2, (d - 1) % kE));
  // Without draft-only uses nothing is demoted: the same stream as target rows keeps LRU.
  auto plain = f.stream(5, 0);
  for (int step = 0; step < 60; ++step) {
    std::vector<int32_t> c(kE, 0), o(kE, -1);
    for (int e = 0; e < 4; ++e) c[static_cast<std::size_t>(e)] = 1;
    {
      LayerPass p(plain.get(), 0, w0, c.data(), kE, o.data());
      while (p.next_batch()) {}
    }
    std::fill(c.begin(), c.end(), 0);
    c[static_cast<std::size_t>(step % kE)] = c[static_cast<std::size_t>((step + 4) % kE)] = 1;
    {
      LayerPass p(plain.get(), 1, weights_of(plain->layout(), 1), c.data(), kE, o.data());
      while (p.next_batch()) {}
    }
  }
  CHECK(!plain->demotes_draft_experts());
  CHECK_EQ(plain->totals().draft_demotions, 0u);
}

TEST(pinning_a_layer_bigger_than_the_cache) {
  Fixture f;
  for (int threads : {0, 2}) {
    for (int slots : {1, 2, 3}) {
      auto st = f.stream(slots, threads);
      run_pass(*st, 1, {0, 1, 2, 3, 4, 5, 6, 7});
      CHECK_EQ(st->resident_count(), slots);
      // The most recently computed experts stay.
      const std::vector<int32_t> lru = st->lru_keys();
      CHECK_EQ(static_cast<int>(lru.size()), slots);
      CHECK_EQ(lru.back(), key(1, 7));
      // Again: the resident ones first, the rest streamed through the remaining slots.
      const std::vector<int> order = run_pass(*st, 1, {0, 1, 2, 3, 4, 5, 6, 7});
      CHECK_EQ(order.front(), 8 - slots);
      CHECK_EQ(st->totals().misses, static_cast<uint64_t>(8 + 8 - slots));
      CHECK_EQ(st->totals().hits, static_cast<uint64_t>(slots));
    }
  }
}

TEST(a_pinned_expert_is_never_evicted) {
  // Two slots, three misses: the first two are pinned from the start (one in the current batch,
  // one loading or loaded), so the third must wait for a release, however long the batch takes.
  Fixture f;
  auto st = f.stream(2, 2);
  std::vector<int32_t> count(kE, 0), order(kE, -1);
  count[1] = count[4] = count[6] = 1;
  const model::MoeWeights w = weights_of(st->layout(), 2);
  const ExpertLayer& lay = st->layout().layers[2];
  LayerPass pass(st.get(), 2, w, count.data(), kE, order.data());
  CHECK_EQ(pass.size(), 3);
  std::vector<int> seen;
  while (pass.next_batch()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (pass.batch_begin() == 0) CHECK(!st->resident_map(2)[6]);
    CHECK(pass.batch_end() - pass.batch_begin() <= 2);
    for (int j = pass.batch_begin(); j < pass.batch_end(); ++j) {
      const int e = pass.order()[j];
      seen.push_back(e);
      CHECK(view_matches(pass.view(j).gate, lay.part[0], e));
      CHECK(view_matches(pass.view(j).down, lay.part[2], e));
    }
  }
  CHECK((seen == std::vector<int>{1, 4, 6}));
}

TEST(prefetch_is_used_by_its_layer_and_released_when_unused) {
  Fixture f;
  for (int threads : {1, 3}) {
    auto st = f.stream(5, threads, DirectIo::Auto, Prefetch::On);
    st->begin_window(1);
    run_pass(*st, 0, {1});
    // Layer 0's pass predicts layer 1's {2, 4, 6}: three reads start, counted resident at once.
    {
      std::vector<int32_t> count(kE, 0), order(kE, -1);
      count[3] = 1;
      LayerPass pass(st.get(), 0, weights_of(st->layout(), 0), count.data(), kE, order.data());
      std::vector<uint8_t> want(kE, 0);
      want[2] = want[4] = want[6] = 1;
      CHECK_EQ(st->prefetch(1, want.data()), 3);
      CHECK_EQ(st->prefetch(1, want.data()), 0);  // already being read
      CHECK(st->resident_map(1)[2] && st->resident_map(1)[4] && st->resident_map(1)[6]);
      while (pass.next_batch()) {}
    }
    // Layer 1 uses 4 and 6 (a prefetched expert is computed after the resident ones, before the misses)
    // and also needs 0; 2 goes unused.
    CHECK((run_pass(*st, 1, {0, 6, 4}) == std::vector<int>{4, 6, 0}));
    st->end_window();
    const ExpertCounters t = st->totals();
    CHECK_EQ(t.prefetch_reads, 3u);
    CHECK_EQ(t.prefetch_used, 2u);
    CHECK_EQ(t.misses, 5u);  // 1, 3, and 0, 4, 6: a prefetched expert was read, so it counts as a miss
    CHECK_EQ(t.hits, 0u);
    CHECK_EQ(t.bytes_read, 6 * f.layout.layers[0].expert_bytes());
    // The unused prefetch went back as the least recently used before layer 1 read its miss, so with the
    // five slots full that miss took its slot; the rest are in the order of use.
    CHECK(!st->resident_map(1)[2]);
    CHECK_EQ(t.evictions, 1u);
    CHECK((st->lru_keys() == std::vector<int32_t>{key(0, 1), key(0, 3), key(1, 4), key(1, 6), key(1, 0)}));
    // Out of range or in mmap mode: nothing.
    std::vector<uint8_t> all(kE, 1);
    CHECK_EQ(st->prefetch(kL, all.data()), 0);
    st->clear();
    CHECK_EQ(st->resident_count(), 0);
  }
  // Without I/O threads, or with the setting off, prefetch reads nothing.
  auto inline_st = f.stream(5, 0);
  std::vector<uint8_t> want(kE, 1);
  CHECK_EQ(inline_st->prefetch(1, want.data()), 0);
  ExpertStoreConfig c;
  c.mode = ExpertMode::Stream;
  c.io_threads = 2;
  c.prefetch = Prefetch::Off;
  ExpertStore off(f.layout, c);
  CHECK_EQ(off.prefetch(1, want.data()), 0);
}

// Auto mode: a layer whose predictions go unused stops reading them after the warm-up, keeps scoring
// them without reading, and reads again once they are used.
TEST(auto_prefetch_follows_the_prediction_s_precision) {
  Fixture f;
  auto st = f.stream(kL * kE, 2);  // room for everything: no eviction gets in the way
  auto predict_and_run = [&](int e_pred, int e_used) {
    const int started = pass_predicting(*st, 0, {0}, {e_pred});
    run_pass(*st, 1, {e_used});
    st->clear();  // both cold again
    return started;
  };
  CHECK(st->prefetch_reads_layer(1));
  int read = 0;
  for (uint32_t i = 0; i < ExpertStore::kPrefetchWarmup; ++i) read += predict_and_run(2, 3);  // always wrong
  CHECK_EQ(read, static_cast<int>(ExpertStore::kPrefetchWarmup));
  CHECK(!st->prefetch_reads_layer(1));
  CHECK_EQ(predict_and_run(2, 3), 0);                                 // recorded, not read
  CHECK(st->prefetch_reads_layer(0) && st->prefetch_reads_layer(2));  // per layer
  int rounds = 0;
  while (!st->prefetch_reads_layer(1) && rounds < 200) {
    CHECK_EQ(predict_and_run(4, 4), 0);  // right, but only scored
    ++rounds;
  }
  CHECK(st->prefetch_reads_layer(1));
  CHECK(rounds > 0 && rounds < 200);
  CHECK_EQ(predict_and_run(4, 4), 1);
  CHECK_EQ(st->totals().prefetch_reads, static_cast<uint64_t>(ExpertStore::kPrefetchWarmup) + 1);
  CHECK_EQ(st->totals().prefetch_used, 1u);
  // On reads whatever the precision.
  auto on = f.stream(kL * kE, 2, DirectIo::Auto, Prefetch::On);
  for (uint32_t i = 0; i < 2 * ExpertStore::kPrefetchWarmup; ++i) {
    CHECK_EQ(pass_predicting(*on, 0, {0}, {2}), 1);
    run_pass(*on, 1, {3});
    on->clear();
  }
  // With no pass open (not the engine's order) nothing is read.
  std::vector<uint8_t> want(kE, 1);
  CHECK_EQ(on->prefetch(1, want.data()), 0);
}

TEST(prefetch_keeps_the_predicted_residents_and_a_tiny_cache_working) {
  Fixture f;
  // Three slots: layer 1's expert 2 is the least recently used when layer 0 predicts {2, 4}; the prefetch
  // of 4 must not evict 2, which the same prediction names.
  auto st = f.stream(3, 2, DirectIo::Auto, Prefetch::On);
  run_pass(*st, 1, {2});
  CHECK_EQ(pass_predicting(*st, 0, {5}, {2, 4}), 1);
  CHECK(st->resident_map(1)[2] && st->resident_map(1)[4]);
  CHECK((run_pass(*st, 1, {2, 4}) == std::vector<int>{2, 4}));
  CHECK_EQ(st->totals().hits, 1u);  // 2 was still there
  // Two slots, expert 2 of layer 1 the only one evictable: the prediction {2, 4} keeps it and reads nothing.
  auto two = f.stream(2, 2, DirectIo::Auto, Prefetch::On);
  run_pass(*two, 1, {2});
  CHECK_EQ(pass_predicting(*two, 0, {5}, {2, 4}), 0);
  CHECK(two->resident_map(1)[2] && !two->resident_map(1)[4]);
  // Two slots, a wrong prediction of two experts: the next pass's miss still finds a slot (the unused
  // predictions are released before it reads).
  auto tiny = f.stream(2, 2, DirectIo::Auto, Prefetch::On);
  CHECK_EQ(pass_predicting(*tiny, 0, {1}, {3, 6}), 1);  // one slot is held by layer 0's expert
  bool ok = false;
  CHECK((run_pass(*tiny, 1, {0, 7}, &ok) == std::vector<int>{0, 7}));
  CHECK(ok);
}

TEST(prefetch_never_takes_a_slot_the_running_layer_waits_for) {
  Fixture f;
  auto st = f.stream(2, 2);
  std::vector<int32_t> count(kE, 0), order(kE, -1);
  count[1] = count[2] = count[3] = 1;  // three experts, two slots: the third waits for a release
  LayerPass pass(st.get(), 0, weights_of(st->layout(), 0), count.data(), kE, order.data());
  std::vector<uint8_t> want(kE, 1);
  CHECK_EQ(st->prefetch(1, want.data()), 0);
  std::vector<int> seen;
  while (pass.next_batch())
    for (int j = pass.batch_begin(); j < pass.batch_end(); ++j) seen.push_back(pass.order()[j]);
  CHECK((seen == std::vector<int>{1, 2, 3}));
}

TEST(a_failed_prefetch_surfaces_in_the_layer_that_uses_it) {
  Fixture f;
  auto st = f.stream(6, 2, DirectIo::Off);
  fail_reads_of(*st, 1, 0, 3);
  CHECK_EQ(pass_predicting(*st, 0, {0}, {3, 5}), 2);
  bool threw = false;
  try {
    run_pass(*st, 1, {3});
  } catch (const Error& e) {
    threw = e.kind() == ErrorKind::IO;
  }
  CHECK(threw);
  CHECK(!st->resident_map(1)[3]);  // dropped, not passed off as resident
  st->reader()->set_pread_hook(nullptr);
  bool ok = false;
  run_pass(*st, 1, {3, 5}, &ok);
  CHECK(ok);
  CHECK(st->resident_map(1)[3] && st->resident_map(1)[5]);
}

TEST(read_fault_surfaces_and_the_store_recovers) {
  Fixture f;
  for (int threads : {0, 3}) {
    auto st = f.stream(6, threads, DirectIo::Off);  // buffered: each read starts at its expert's bytes
    fail_reads_of(*st, 1, 1, 5);
    std::vector<int32_t> count(kE, 0), order(kE, -1);
    count[2] = count[5] = count[7] = 1;
    const model::MoeWeights w = weights_of(st->layout(), 1);
    std::string msg;
    std::vector<int> computed;
    try {
      LayerPass pass(st.get(), 1, w, count.data(), kE, order.data());
      while (pass.next_batch())
        for (int j = pass.batch_begin(); j < pass.batch_end(); ++j) computed.push_back(pass.order()[j]);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::IO);
      msg = e.what();
    }
    // Expert 2 may have come in a batch of its own; the batch holding 5 never reaches the compute.
    CHECK(computed.empty() || computed == std::vector<int>{2});
    CHECK(msg.find("expert 5 of layer 1 (ffn_up_exps") != std::string::npos);
    CHECK(msg.find("Input/output error") != std::string::npos);
    CHECK(msg.find(f.file->path()) != std::string::npos);
    CHECK(!st->resident_map(1)[5]);  // never passed off as resident
    CHECK(st->resident_map(1)[2]);
    // Recovery: without the fault, the next pass loads it.
    st->reader()->set_pread_hook(nullptr);
    bool ok = false;
    run_pass(*st, 1, {5, 7}, &ok);
    CHECK(ok);
    CHECK(st->resident_map(1)[5] && st->resident_map(1)[7]);
  }
}

TEST(truncated_file_is_an_io_error) {
  Fixture f;
  auto st = f.stream(4, 2);
  run_pass(*st, 0, {1});
  f.file->truncate(f.layout.layers[2].part[0].file_offset + 10);
  bool threw = false;
  try {
    run_pass(*st, 2, {3});
  } catch (const Error& e) {
    threw = e.kind() == ErrorKind::IO && std::string(e.what()).find("unexpected end of file") != std::string::npos &&
            std::string(e.what()).find("expert 3 of layer 2") != std::string::npos;
  }
  CHECK(threw);
  CHECK(!st->resident_map(2)[3]);
  // Earlier residents are untouched and still hit.
  run_pass(*st, 0, {1});
  CHECK_EQ(st->totals().hits, 1u);
}

TEST(direct_io_fallback_is_reported) {
  Fixture f;
  auto st = f.stream(4, 1, DirectIo::Off);
  CHECK(!st->direct_io());
  CHECK(st->io_note().find("buffered") != std::string::npos);
  bool ok = false;
  run_pass(*st, 0, {0, 7}, &ok);
  CHECK(ok);
  CHECK_EQ(st->totals().io_bytes, st->totals().bytes_read);
  auto auto_st = f.stream(4, 1, DirectIo::Auto);
  std::printf("stream store on %s: %s\n", f.file->path().c_str(), auto_st->io_note().c_str());
  if (auto_st->direct_io()) {
    auto_st->reader()->set_pread_hook([](int fd, void* buf, std::size_t n, uint64_t off, bool direct) -> ssize_t {
      if (direct) {
        errno = EINVAL;
        return -1;
      }
      return ::pread(fd, buf, n, static_cast<off_t>(off));
    });
    run_pass(*auto_st, 0, {0, 7}, &ok);
    CHECK(ok);
    CHECK(!auto_st->direct_io());
    CHECK(auto_st->io_note().find("direct read refused") != std::string::npos);
  }
}

TEST(mmap_mode_views_and_counts) {
  Fixture f;
  MmapFile map(f.file->path());
  uint64_t size = 0;
  ExpertLayout lay = make_layout(f.file->path(), kL, kE, kRows, kCols, &size, map.data());
  ExpertStoreConfig c;  // mmap
  c.page_cache_probe = true;
  ExpertStore st(lay, c);
  CHECK(st.resident_map(0) == nullptr);
  CHECK_EQ(st.n_slots(), 0);
  CHECK(st.io_note() == "mmap");
  st.begin_window(1);
  std::vector<int32_t> count(kE, 0), order(kE, -1);
  count[6] = count[3] = 2;
  const model::MoeWeights w = weights_of(lay, 2);
  {
    LayerPass pass(&st, 2, w, count.data(), kE, order.data());
    CHECK(pass.next_batch());
    CHECK(pass.batch_begin() == 0 && pass.batch_end() == 2);  // one batch of every expert
    CHECK((std::vector<int32_t>(order.begin(), order.begin() + 2) == std::vector<int32_t>{3, 6}));
    for (int j = 0; j < 2; ++j) {
      const int e = order[static_cast<std::size_t>(j)];
      CHECK(pass.view(j).gate.data == lay.layers[2].part[0].view.expert(e).data);  // the mapping itself
      CHECK(view_matches(pass.view(j).down, lay.layers[2].part[2], e));
    }
    CHECK(!pass.next_batch());
  }
  st.end_window();
  CHECK_EQ(st.totals().hits + st.totals().misses, 2u);
  CHECK(st.resident_bytes() > 0);  // the file was just written: its pages are cached
  // Without a store: the same single batch, nothing counted.
  LayerPass plain(nullptr, 2, w, count.data(), kE, order.data());
  CHECK(plain.next_batch() && plain.batch_end() == 2 && plain.size() == 2);
  CHECK(!plain.next_batch());
}

TEST(stress_random_passes_with_io_threads) {
  Fixture f;
  std::mt19937 g(7);
  for (int round = 0; round < 6; ++round) {
    const int slots = 1 + static_cast<int>(g() % (kL * kE));
    const int threads = static_cast<int>(g() % 4);
    auto st = f.stream(slots, threads);
    uint64_t uses = 0;
    for (int it = 0; it < 150; ++it) {
      const int layer = static_cast<int>(g() % kL);
      std::set<int> want;
      const int n = 1 + static_cast<int>(g() % kE);
      for (int j = 0; j < n; ++j) want.insert(static_cast<int>(g() % kE));
      bool ok = false;
      const std::vector<int> order = run_pass(*st, layer, {want.begin(), want.end()}, &ok);
      if (!ok) break;
      CHECK_EQ(order.size(), want.size());
      uses += want.size();
      // Invariants: the map agrees with the LRU list (nothing pinned between passes).
      const std::vector<int32_t> lru = st->lru_keys();
      CHECK(static_cast<int64_t>(lru.size()) <= slots);
      CHECK_EQ(static_cast<int64_t>(lru.size()), st->resident_count());
      for (int32_t k : lru) CHECK(st->resident_map(k / kE)[k % kE]);
    }
    const ExpertCounters t = st->totals();
    CHECK_EQ(t.hits + t.misses, uses);
    CHECK_EQ(t.bytes_read, t.misses * f.layout.layers[0].expert_bytes());
    CHECK(t.prefetch_hits <= t.misses);
  }
}

TEST(no_allocation_per_pass) {
  Fixture f;
  for (int threads : {0, 2}) {
    auto st = f.stream(5, threads);
    std::vector<model::MoeWeights> w;
    for (int l = 0; l < kL; ++l) w.push_back(weights_of(st->layout(), l));
    std::vector<int32_t> count(kE, 0), order(kE, -1);
    std::mt19937 g(3);
    auto run = [&](int passes) {
      long sum = 0;
      for (int it = 0; it < passes; ++it) {
        const int layer = static_cast<int>(g() % kL);
        for (int e = 0; e < kE; ++e) count[static_cast<std::size_t>(e)] = (g() % 3 == 0) ? 1 : 0;
        st->begin_window(1);
        {
          LayerPass pass(st.get(), layer, w[static_cast<std::size_t>(layer)], count.data(), kE, order.data());
          while (pass.next_batch())
            for (int j = pass.batch_begin(); j < pass.batch_end(); ++j) sum += pass.view(j).gate.data[0];
        }
        st->end_window();
      }
      return sum;
    };
    run(50);  // warm-up
    const long before = g_allocs.load();
    const long sum = run(300);
    const long allocs = g_allocs.load() - before;
    CHECK_EQ(allocs, 0L);
    CHECK(sum != 0);
    CHECK(st->totals().misses > 100);
  }
}

// A layer whose experts are in a second file (deepseek4's MTP file): read with that file's reader,
// its ranges checked against that file's size, its faults naming that file.
TEST(a_layer_in_a_second_file) {
  Fixture f;
  uint64_t size_b = 0;
  make_layout("", 1, kE, kRows + 2, kCols, &size_b);  // other shapes: other offsets, a bigger slot
  TempFile b(size_b);
  ExpertLayout lay = f.layout;
  ExpertLayer second = make_layout(b.path(), 1, kE, kRows + 2, kCols, &size_b).layers[0];
  second.file = 1;
  lay.layers.push_back(second);
  lay.files.push_back(b.path());
  ExpertStoreConfig c;
  c.mode = ExpertMode::Stream;
  c.io_threads = 2;
  c.cache_fraction = 0.25;  // 8 of 32 slots
  {
    ExpertStore st(lay, c);
    CHECK_EQ(st.n_layers(), kL + 1);
    CHECK(st.reader(1) && st.reader(1)->path() == b.path() && st.reader(2) == nullptr);
    bool ok = false;
    run_pass(st, kL, {0, 5, 7}, &ok);  // checks every byte against the second file's positions
    CHECK(ok);
    run_pass(st, 0, {1, 2}, &ok);
    CHECK(ok);
    const ExpertCounters t = st.totals();
    CHECK_EQ(t.misses, 5u);
    CHECK_EQ(t.bytes_read, 3 * second.expert_bytes() + 2 * f.layout.layers[0].expert_bytes());
    // A failed read names the second file.
    b.truncate(second.part[0].file_offset + 10);
    bool threw = false;
    try {
      run_pass(st, kL, {3});
    } catch (const Error& e) {
      threw = e.kind() == ErrorKind::IO && std::string(e.what()).find(b.path()) != std::string::npos;
    }
    CHECK(threw);
  }
  // Ranges past the second file's end: a Format error naming it (the first file is big enough).
  bool threw = false;
  try {
    ExpertStore st(lay, c);
  } catch (const Error& e) {
    threw = e.kind() == ErrorKind::Format && std::string(e.what()).find(b.path()) != std::string::npos &&
            std::string(e.what()).find("layer 3") != std::string::npos;
  }
  CHECK(threw);
  // A layer naming a file the layout does not have.
  ExpertLayout wrong = lay;
  wrong.layers.back().file = 2;
  threw = false;
  try {
    ExpertStore st(wrong, c);
  } catch (const Error& e) {
    threw = e.kind() == ErrorKind::Format && std::string(e.what()).find("names file 2 of 2") != std::string::npos;
  }
  CHECK(threw);
}
