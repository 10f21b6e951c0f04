#include "strata/routing/window_routing.h"

namespace strata::routing {

MoceParams window_draft_params(const MoceParams& p) {
  MoceParams w;
  w.resident_bonus = p.window_bonus;
  w.rank1_scale = 1.0f;
  w.protect = 1;
  w.draft = true;
  w.window_bonus = p.window_bonus;
  return w;
}

void window_map_begin(uint8_t* map, const uint8_t* resident, int n_experts, const int32_t* ids, int64_t n_ids) {
  for (int e = 0; e < n_experts; ++e) map[e] = resident != nullptr && resident[e] != 0 ? 1 : 0;
  for (int64_t i = 0; i < n_ids; ++i) map[ids[i]] = 1;
}

void window_map_add(uint8_t* map, const int32_t* ids, int n) {
  for (int i = 0; i < n; ++i) map[ids[i]] = 1;
}

int window_rows_kept(const uint8_t* resident, int n_experts, const int32_t* ids, int k, int n_rows, int cut_from_row,
                     uint8_t* map) {
  if (resident == nullptr || cut_from_row < 1 || cut_from_row >= n_rows) return n_rows;
  window_map_begin(map, resident, n_experts, ids, static_cast<int64_t>(cut_from_row) * k);
  for (int r = cut_from_row; r < n_rows; ++r) {
    const int32_t* row = ids + static_cast<int64_t>(r) * k;
    for (int i = 0; i < k; ++i)
      if (map[row[i]] == 0) return r;
    window_map_add(map, row, k);
  }
  return n_rows;
}

void route_window_rows(const float* probs, int n_rows, int n_experts, int k, const uint8_t* resident,
                       const MoceParams& p, int first_draft, uint8_t* map, int32_t* ids, float* weights) {
  const bool window = window_routing_on(p) && first_draft >= 0 && first_draft < n_rows;
  const int n_target = window ? first_draft : n_rows;
  for (int r = 0; r < n_target; ++r)
    route_row(probs + static_cast<int64_t>(r) * n_experts, n_experts, k, resident, p,
              first_draft >= 0 && r >= first_draft, ids + static_cast<int64_t>(r) * k,
              weights + static_cast<int64_t>(r) * k);
  if (!window) return;
  window_map_begin(map, resident, n_experts, ids, static_cast<int64_t>(n_target) * k);
  const MoceParams wp = window_draft_params(p);
  for (int r = n_target; r < n_rows; ++r) {
    int32_t* row_ids = ids + static_cast<int64_t>(r) * k;
    route_row(probs + static_cast<int64_t>(r) * n_experts, n_experts, k, map, wp, true, row_ids,
              weights + static_cast<int64_t>(r) * k);
    window_map_add(map, row_ids, k);
  }
}

}  // namespace strata::routing
