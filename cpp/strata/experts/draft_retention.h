#pragma once
// Where the expert store puts the experts that only a verification window's draft rows used
// (docs/experts.md, "Retention of draft rows"): at the most recently used end of its LRU list, as any
// other use, or at the least recently used end (the first to be evicted). Neither changes a computed
// value: residency decides only what is read, never what a row computes (MOCE off; with MOCE on the
// router reads the map either way).
//
// Which one reads less depends on the store's size against the model's working set. A small store
// thrashes under plain LRU, and keeping draft-only experts out of the protected end lets it hold a
// stable part of the working set (reads fell 12 % at 25 % resident on the wide demo model). A larger
// store keeps what the next tokens reuse, draft rows' experts included, and demoting them all costs
// reads (+5 % at 50 %), where demoting only those that had to be read saves some. So the store runs the
// three placements side by side on its own use stream, as shadow directories of keys with its capacity
// (set dueling, as in Qureshi et al.'s dynamic insertion policy), and follows the one that missed least
// over the recent uses. The shadows see every use in the order the passes make them and ignore
// prefetch, which adds reads to each alike.
//
// No allocation after construction; O(1) per use. Not thread-safe: the store calls it under its lock.
#include <cstdint>
#include <vector>

#include "strata/experts/index_list.h"

namespace strata::experts {

// Where a use that only draft rows made puts its expert: like any use (Keep), at the LRU end when it had
// to be read (DemoteReads: an expert already resident keeps its refresh), or at the LRU end always.
enum class DraftPlacement : uint8_t { Keep = 0, DemoteReads = 1, DemoteAll = 2 };
inline constexpr int kDraftPlacements = 3;

// An LRU directory of keys (no data): which of n_keys keys a cache of `capacity` entries would hold.
class ShadowLru {
 public:
  ShadowLru(int32_t n_keys, int32_t capacity);
  // One use of key, placed by p when draft_only (else like any use). Returns true on a miss.
  bool use(int32_t key, bool draft_only, DraftPlacement p);
  bool holds(int32_t key) const { return list_.contains(key); }
  int32_t size() const { return list_.size(); }

 private:
  int32_t n_keys_, capacity_;
  IndexList list_;
};

class DraftRetention {
 public:
  DraftRetention(int32_t n_keys, int32_t capacity);
  // One use of key by a pass; draft_only: only a verification window's draft rows used it.
  void use(int32_t key, bool draft_only);
  // The placement the store follows now (Keep until another one has missed clearly less).
  DraftPlacement placement() const { return current_; }
  // Whether the store puts a draft-only use at the LRU end now; read: the expert had to be read.
  bool at_front(bool read) const {
    return current_ == DraftPlacement::DemoteAll || (current_ == DraftPlacement::DemoteReads && read);
  }
  // A shadow's misses over the recent uses (decayed), for stats and tests.
  double misses(DraftPlacement p) const { return miss_[static_cast<int>(p)]; }

  // Uses per decay step (all counts halve); another placement must miss less by this share and by at
  // least kSwitchLead misses for the store to switch (no flapping on ties or on a few early misses).
  static constexpr uint32_t kDecayUses = 4096;
  static constexpr double kSwitchMargin = 0.01;
  static constexpr double kSwitchLead = 8.0;

 private:
  std::vector<ShadowLru> shadows_;  // one per DraftPlacement
  double miss_[kDraftPlacements] = {};
  uint32_t uses_ = 0;
  DraftPlacement current_ = DraftPlacement::Keep;
};

}  // namespace strata::experts
