#pragma once
// A doubly linked list over the indices 0..n-1, each in it at most once, in arrays sized at construction:
// insertion at either end, removal and membership in O(1), nothing allocated afterwards. The expert
// store's LRU list of slots and the retention duel's shadow directories of keys (front = least recently
// used, back = most recently used). Not thread-safe.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::experts {

class IndexList {
 public:
  explicit IndexList(int32_t n = 0)
      : prev_(static_cast<std::size_t>(n > 0 ? n : 0), -1), next_(prev_.size(), -1), in_(prev_.size(), 0) {}

  bool contains(int32_t i) const { return in_[at(i)] != 0; }
  int32_t front() const { return head_; }  // -1 when empty
  int32_t next(int32_t i) const { return next_[at(i)]; }
  int32_t size() const { return size_; }

  // Does nothing when i is not in the list.
  void remove(int32_t i) {
    const std::size_t k = at(i);
    if (!in_[k]) return;
    (prev_[k] >= 0 ? next_[at(prev_[k])] : head_) = next_[k];
    (next_[k] >= 0 ? prev_[at(next_[k])] : tail_) = prev_[k];
    prev_[k] = next_[k] = -1;
    in_[k] = 0;
    --size_;
  }

  // i must not be in the list.
  void push(int32_t i, bool at_front) {
    const std::size_t k = at(i);
    int32_t& end = at_front ? head_ : tail_;  // the end i joins
    (at_front ? next_ : prev_)[k] = end;
    (at_front ? prev_ : next_)[k] = -1;
    if (end >= 0)
      (at_front ? prev_ : next_)[at(end)] = i;
    else
      (at_front ? tail_ : head_) = i;
    end = i;
    in_[k] = 1;
    ++size_;
  }

 private:
  static std::size_t at(int32_t i) { return static_cast<std::size_t>(i); }

  std::vector<int32_t> prev_, next_;
  std::vector<uint8_t> in_;
  int32_t head_ = -1, tail_ = -1, size_ = 0;
};

}  // namespace strata::experts
