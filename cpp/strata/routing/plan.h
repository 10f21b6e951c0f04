#pragma once
// The MoE plan of a window (SPEC §2.4 "Plan", R-2): the (row, rank, expert) entries routed for n rows
// grouped by expert — resident groups first, then by expert id, entries in row order (a stable sort) —
// with group offsets and a complete, unique slot mapping in both directions.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::routing {

struct Plan {
  int n_rows = 0;
  int k = 0;
  // Groups in plan order: group g is expert group_expert[g], its entries fill the slots
  // [group_offset[g], group_offset[g + 1]). Groups [0, n_resident_groups) are resident and hold the
  // slots [0, n_resident_slots).
  std::vector<int32_t> group_expert;
  std::vector<int32_t> group_offset;  // size groups + 1
  int n_resident_groups = 0;
  int n_resident_slots = 0;
  // Entry e = row * k + rank (the layout route_row fills). slot_entry[s] is the entry at slot s;
  // entry_slot[e] is the slot of entry e (the inverse map).
  std::vector<int32_t> slot_entry;
  std::vector<int32_t> entry_slot;

  int groups() const { return static_cast<int>(group_expert.size()); }
  int32_t row_of_slot(int s) const { return slot_entry[static_cast<size_t>(s)] / k; }
  int32_t rank_of_slot(int s) const { return slot_entry[static_cast<size_t>(s)] % k; }

  // Scratch reused across calls so a steady-state decode loop does not allocate.
  std::vector<int32_t> count_scratch;
};

// ids: n_rows × k expert ids, row-major. resident: nullptr (no residency map: one unsplit ordering by
// expert id, n_resident_groups = 0) or n_experts bytes, nonzero = resident. Rebuilds `out` in place
// (its vectors keep their capacity). Throws Value on an id outside [0, n_experts) or bad sizes.
void build_plan(const int32_t* ids, int n_rows, int k, int n_experts, const uint8_t* resident, Plan& out);

}  // namespace strata::routing
