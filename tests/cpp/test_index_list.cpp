// IndexList (experts/index_list.h), the linked list under the expert store's LRU and the retention
// duel's shadow directories: order after pushes at both ends, removal anywhere, membership and size.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cstdint>
#include <vector>

#include "strata/experts/index_list.h"

using strata::experts::IndexList;

namespace {
std::vector<int32_t> items(const IndexList& l) {
  std::vector<int32_t> out;
  for (int32_t i = l.front(); i >= 0; i = l.next(i)) out.push_back(i);
  return out;
}
}  // namespace

TEST(pushes_at_both_ends_keep_their_order) {
  IndexList l(8);
  CHECK_EQ(l.front(), -1);
  CHECK_EQ(l.size(), 0);
  l.push(3, false);
  l.push(5, false);
  l.push(1, true);
  l.push(7, false);
  l.push(0, true);
  CHECK((items(l) == std::vector<int32_t>{0, 1, 3, 5, 7}));
  CHECK_EQ(l.size(), 5);
  CHECK(l.contains(5) && !l.contains(2));
}

TEST(removal_anywhere_and_reinsertion) {
  IndexList l(6);
  for (int32_t i = 0; i < 6; ++i) l.push(i, false);
  l.remove(0);  // the front
  l.remove(5);  // the back
  l.remove(3);  // the middle
  l.remove(3);  // absent: nothing
  CHECK((items(l) == std::vector<int32_t>{1, 2, 4}));
  CHECK_EQ(l.size(), 3);
  l.push(3, true);
  l.push(0, false);
  CHECK((items(l) == std::vector<int32_t>{3, 1, 2, 4, 0}));
  for (int32_t i : {3, 1, 2, 4, 0}) l.remove(i);
  CHECK_EQ(l.front(), -1);
  CHECK_EQ(l.size(), 0);
  l.push(2, false);  // an emptied list works as a new one
  CHECK((items(l) == std::vector<int32_t>{2}));
}
