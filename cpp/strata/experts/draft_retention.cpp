#include "strata/experts/draft_retention.h"

#include <algorithm>

namespace strata::experts {

ShadowLru::ShadowLru(int32_t n_keys, int32_t capacity)
    : n_keys_(std::max<int32_t>(n_keys, 0)), capacity_(std::max<int32_t>(capacity, 0)), list_(n_keys_) {}

bool ShadowLru::use(int32_t key, bool draft_only, DraftPlacement p) {
  if (key < 0 || key >= n_keys_ || capacity_ == 0) return true;
  const bool miss = !list_.contains(key);
  if (!miss)
    list_.remove(key);
  else if (list_.size() >= capacity_)
    list_.remove(list_.front());  // the least recently used goes
  list_.push(key, draft_only && (p == DraftPlacement::DemoteAll || (p == DraftPlacement::DemoteReads && miss)));
  return miss;
}

DraftRetention::DraftRetention(int32_t n_keys, int32_t capacity) {
  shadows_.reserve(kDraftPlacements);
  for (int p = 0; p < kDraftPlacements; ++p) shadows_.emplace_back(n_keys, capacity);
}

void DraftRetention::use(int32_t key, bool draft_only) {
  for (int p = 0; p < kDraftPlacements; ++p)
    miss_[p] += shadows_[static_cast<std::size_t>(p)].use(key, draft_only, static_cast<DraftPlacement>(p)) ? 1.0 : 0.0;
  if (++uses_ >= kDecayUses) {
    uses_ = 0;
    for (double& m : miss_) m *= 0.5;
  }
  // Follow the shadow that missed least, switching only when it wins by the margin and the lead.
  int best = 0;
  for (int p = 1; p < kDraftPlacements; ++p)
    if (miss_[p] < miss_[best]) best = p;
  const double now = miss_[static_cast<int>(current_)];
  if (miss_[best] < now * (1.0 - kSwitchMargin) && now - miss_[best] >= kSwitchLead)
    current_ = static_cast<DraftPlacement>(best);
}

}  // namespace strata::experts
