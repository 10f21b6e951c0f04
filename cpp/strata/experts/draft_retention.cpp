#include "strata/experts/draft_retention.h"

#include <algorithm>

namespace strata::experts {

ShadowLru::ShadowLru(int32_t n_keys, int32_t capacity)
    : capacity_(std::max<int32_t>(capacity, 0)),
      prev_(static_cast<std::size_t>(std::max<int32_t>(n_keys, 0)), -1),
      next_(static_cast<std::size_t>(std::max<int32_t>(n_keys, 0)), -1),
      in_(static_cast<std::size_t>(std::max<int32_t>(n_keys, 0)), 0) {}

void ShadowLru::unlink(int32_t k) {
  const std::size_t i = static_cast<std::size_t>(k);
  if (prev_[i] >= 0)
    next_[static_cast<std::size_t>(prev_[i])] = next_[i];
  else
    head_ = next_[i];
  if (next_[i] >= 0)
    prev_[static_cast<std::size_t>(next_[i])] = prev_[i];
  else
    tail_ = prev_[i];
  prev_[i] = next_[i] = -1;
  in_[i] = 0;
  --size_;
}

void ShadowLru::push_back(int32_t k) {
  const std::size_t i = static_cast<std::size_t>(k);
  prev_[i] = tail_;
  next_[i] = -1;
  if (tail_ >= 0)
    next_[static_cast<std::size_t>(tail_)] = k;
  else
    head_ = k;
  tail_ = k;
  in_[i] = 1;
  ++size_;
}

void ShadowLru::push_front(int32_t k) {
  const std::size_t i = static_cast<std::size_t>(k);
  prev_[i] = -1;
  next_[i] = head_;
  if (head_ >= 0)
    prev_[static_cast<std::size_t>(head_)] = k;
  else
    tail_ = k;
  head_ = k;
  in_[i] = 1;
  ++size_;
}

bool ShadowLru::use(int32_t key, bool draft_only, DraftPlacement p) {
  if (key < 0 || static_cast<std::size_t>(key) >= in_.size() || capacity_ == 0) return true;
  const bool miss = in_[static_cast<std::size_t>(key)] == 0;
  if (!miss)
    unlink(key);
  else if (size_ >= capacity_)
    unlink(head_);  // the least recently used goes
  const bool front = draft_only && (p == DraftPlacement::DemoteAll || (p == DraftPlacement::DemoteReads && miss));
  if (front)
    push_front(key);
  else
    push_back(key);
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
