// The plan is a counting sort by expert: count entries per expert, lay the groups out (resident
// experts ascending, then nonresident ascending), then drop entries into their group in entry order,
// which is row order — so the result is exactly a stable sort by (nonresident, expert).
#include "strata/routing/plan.h"

#include <string>

#include "strata/util/error.h"

namespace strata::routing {

void build_plan(const int32_t* ids, int n_rows, int k, int n_experts, const uint8_t* resident, Plan& out) {
  if (n_rows < 0 || k < 1 || n_experts < 1)
    throw_error(ErrorKind::Value, "build_plan: need n_rows >= 0, k >= 1, n_experts >= 1 (got " +
                                      std::to_string(n_rows) + ", " + std::to_string(k) + ", " +
                                      std::to_string(n_experts) + ")");
  const int64_t n_entries64 = static_cast<int64_t>(n_rows) * k;
  if (n_entries64 > INT32_MAX) throw_error(ErrorKind::Value, "build_plan: too many entries");
  const int n_entries = static_cast<int>(n_entries64);

  auto& count = out.count_scratch;  // per expert: entries, then the next free slot of its group
  count.assign(static_cast<size_t>(n_experts), 0);
  for (int e = 0; e < n_entries; ++e) {
    const int32_t x = ids[e];
    if (x < 0 || x >= n_experts)
      throw_error(ErrorKind::Value, "build_plan: expert id " + std::to_string(x) + " at row " + std::to_string(e / k) +
                                        " rank " + std::to_string(e % k) + " is outside [0, " +
                                        std::to_string(n_experts) + ")");
    ++count[static_cast<size_t>(x)];
  }

  out.n_rows = n_rows;
  out.k = k;
  out.group_expert.clear();
  out.group_offset.clear();
  int32_t slot = 0;
  auto lay_out = [&](bool want_resident) {
    for (int x = 0; x < n_experts; ++x) {
      const bool is_res = resident != nullptr && resident[x] != 0;
      if (is_res != want_resident || count[static_cast<size_t>(x)] == 0) continue;
      out.group_expert.push_back(x);
      out.group_offset.push_back(slot);
      const int32_t c = count[static_cast<size_t>(x)];
      count[static_cast<size_t>(x)] = slot;
      slot += c;
    }
  };
  lay_out(true);
  out.n_resident_groups = static_cast<int>(out.group_expert.size());
  out.n_resident_slots = slot;
  lay_out(false);
  out.group_offset.push_back(slot);

  out.slot_entry.resize(static_cast<size_t>(n_entries));
  out.entry_slot.resize(static_cast<size_t>(n_entries));
  for (int e = 0; e < n_entries; ++e) {
    const int32_t s = count[static_cast<size_t>(ids[e])]++;
    out.slot_entry[static_cast<size_t>(s)] = e;
    out.entry_slot[static_cast<size_t>(e)] = s;
  }
}

}  // namespace strata::routing
