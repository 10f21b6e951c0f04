// The expert store's retention duel (experts/draft_retention.h): the shadow LRU directory, and the
// placement of draft-only experts it follows — demoted on a stream where keeping them thrashes the
// store, kept on one where the next rows reuse them, never switched without draft-only uses.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cstdint>
#include <vector>

#include "strata/experts/draft_retention.h"

using strata::experts::DraftPlacement;
using strata::experts::DraftRetention;
using strata::experts::ShadowLru;

TEST(shadow_lru_evicts_the_least_recently_used) {
  ShadowLru s(10, 3);
  CHECK(s.use(1, false, DraftPlacement::Keep));
  CHECK(s.use(2, false, DraftPlacement::Keep));
  CHECK(s.use(3, false, DraftPlacement::Keep));
  CHECK(!s.use(1, false, DraftPlacement::Keep));  // a hit refreshes 1: 2 is now the oldest
  CHECK(s.use(4, false, DraftPlacement::Keep));   // evicts 2
  CHECK(!s.holds(2) && s.holds(1) && s.holds(3) && s.holds(4));
  CHECK_EQ(s.size(), 3);
  CHECK(s.use(-1, false, DraftPlacement::Keep) && s.use(10, false, DraftPlacement::Keep));  // out of range
  CHECK_EQ(s.size(), 3);
}

TEST(shadow_lru_places_draft_only_uses_by_the_placement) {
  // DemoteAll: a draft-only use, hit or miss, becomes the first to go.
  ShadowLru all(10, 3);
  for (int k : {1, 2, 3}) all.use(k, false, DraftPlacement::Keep);
  CHECK(!all.use(3, true, DraftPlacement::DemoteAll));  // hit, moved to the LRU end
  all.use(4, false, DraftPlacement::Keep);              // evicts 3, not 1
  CHECK(!all.holds(3) && all.holds(1) && all.holds(2) && all.holds(4));
  // DemoteReads: a draft-only hit refreshes as any use; a draft-only miss enters at the LRU end.
  ShadowLru reads(10, 3);
  for (int k : {1, 2, 3}) reads.use(k, false, DraftPlacement::Keep);
  CHECK(!reads.use(1, true, DraftPlacement::DemoteReads));  // hit: 1 refreshed, 2 the oldest
  CHECK(reads.use(5, true, DraftPlacement::DemoteReads));   // miss: evicts 2, enters at the LRU end
  CHECK(!reads.holds(2) && reads.holds(5));
  reads.use(6, false, DraftPlacement::Keep);  // evicts 5 (the LRU end), not 3
  CHECK(!reads.holds(5) && reads.holds(3) && reads.holds(1) && reads.holds(6));
  // Keep: a draft-only use is any use.
  ShadowLru keep(10, 3);
  for (int k : {1, 2, 3}) keep.use(k, false, DraftPlacement::Keep);
  CHECK(keep.use(5, true, DraftPlacement::Keep));  // evicts 1
  keep.use(6, false, DraftPlacement::Keep);        // evicts 2
  CHECK(keep.holds(5) && !keep.holds(1) && !keep.holds(2));
}

TEST(without_draft_only_uses_the_store_keeps_lru) {
  DraftRetention r(64, 4);
  for (int i = 0; i < 5000; ++i) r.use(i % 7, false);  // a thrashing cycle, but nothing to place
  CHECK(r.placement() == DraftPlacement::Keep);
  CHECK(!r.at_front(true) && !r.at_front(false));
  CHECK_EQ(r.misses(DraftPlacement::Keep), r.misses(DraftPlacement::DemoteAll));
}

TEST(demotes_when_draft_only_experts_would_push_out_the_working_set) {
  // Four target experts that fit a 5-entry store, and between their uses draft-only experts never used
  // again: kept, each pushes a target expert out; demoted, each replaces the last one.
  DraftRetention r(1024, 5);
  int fresh = 100;
  for (int step = 0; step < 200; ++step) {
    for (int k = 0; k < 4; ++k) r.use(k, false);
    r.use(fresh++, true);
    r.use(fresh++, true);
  }
  CHECK(r.placement() != DraftPlacement::Keep);
  CHECK(r.at_front(/*read=*/true));
  CHECK(r.misses(DraftPlacement::DemoteAll) < 0.8 * r.misses(DraftPlacement::Keep));
}

TEST(keeps_when_the_next_rows_reuse_what_draft_rows_used) {
  // A draft-only expert that the next target row uses after one other miss: kept, it is a hit there;
  // demoted, that miss evicts it first.
  DraftRetention r(4096, 4);
  int fresh = 100;
  for (int step = 0; step < 400; ++step) {
    const int d = fresh++, m = fresh++;
    r.use(d, true);
    r.use(m, false);
    r.use(d, false);
    r.use(step % 2, false);
  }
  CHECK(r.placement() == DraftPlacement::Keep);
  CHECK(r.misses(DraftPlacement::Keep) < r.misses(DraftPlacement::DemoteAll));
}

TEST(switches_back_when_the_stream_changes) {
  DraftRetention r(1 << 16, 5);
  int fresh = 100;
  for (int step = 0; step < 200; ++step) {  // the thrashing stream: demote
    for (int k = 0; k < 4; ++k) r.use(k, false);
    r.use(fresh++, true);
    r.use(fresh++, true);
  }
  CHECK(r.placement() != DraftPlacement::Keep);
  for (int step = 0; step < 6000; ++step) {  // the reusing stream: keep (old evidence decays)
    const int d = fresh++, m = fresh++;
    r.use(d, true);
    r.use(m, false);
    r.use(d, false);
  }
  CHECK(r.placement() == DraftPlacement::Keep);
}

TEST(an_empty_store_misses_everything) {
  DraftRetention r(8, 0);
  for (int i = 0; i < 100; ++i) r.use(i % 8, i % 2 == 0);
  CHECK(r.placement() == DraftPlacement::Keep);
  CHECK_EQ(r.misses(DraftPlacement::Keep), r.misses(DraftPlacement::DemoteAll));
}
