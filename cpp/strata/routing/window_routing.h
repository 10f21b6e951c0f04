#pragma once
// Streaming-aware verification windows (docs/routing.md, "Window routing"): the draft rows of a
// verification window (rows >= first_draft) are routed one after another with the draft-row rule
// (m = b², r_prot = 1, b = MoceParams::window_bonus) against a residency that already counts every
// expert the window has requested — the store's resident experts, the target rows' choices and the
// choices of the draft rows before it. A draft row then prefers experts the window reads anyway, so
// the window touches fewer distinct experts (never more non-resident ones than plain top-K: each
// row's new experts are a prefix of its plain top-K order among the experts not yet requested).
// Off (window_bonus <= 1) it changes nothing. No allocation: the map is caller scratch of E bytes.
#include <cstdint>

#include "strata/routing/router.h"

namespace strata::routing {

inline bool window_routing_on(const MoceParams& p) { return p.window_bonus > 1.0f; }

// What a draft row is routed with under window routing: b = window_bonus, the draft-row rule.
MoceParams window_draft_params(const MoceParams& p);

// map[e] = 1 if resident[e] != 0 (no map: nobody) or e is one of ids[0 .. n_ids), else 0.
void window_map_begin(uint8_t* map, const uint8_t* resident, int n_experts, const int32_t* ids, int64_t n_ids);
// map[ids[i]] = 1 for i < n.
void window_map_add(uint8_t* map, const int32_t* ids, int n);

// Exact window cuts (STRATA_SPEC_WINDOW_CUT, docs/routing.md): the first row r >= cut_from_row (>= 1)
// of a window routed as ids [n_rows][k] that requests an expert neither resident (no map: all are)
// nor requested by rows < r; n_rows when there is none. The window drops that row and every row after
// it from this layer on, so its reads are those of the rows before; the rows it keeps are computed
// exactly as without the cut (a row depends only on itself and the rows before it). map: E bytes of
// scratch.
int window_rows_kept(const uint8_t* resident, int n_experts, const int32_t* ids, int k, int n_rows, int cut_from_row,
                     uint8_t* map);

// The whole rule over a window of softmax rows [R][E] (tests, Python): rows < first_draft with
// route_row(p, draft_row = r >= first_draft under p's own draft flag, i.e. target rows), then each draft row
// against the growing map. first_draft < 0 or >= R: every row is a target row. map: E bytes of scratch.
void route_window_rows(const float* probs, int n_rows, int n_experts, int k, const uint8_t* resident,
                       const MoceParams& p, int first_draft, uint8_t* map, int32_t* ids, float* weights);

}  // namespace strata::routing
