#pragma once
// deepseek4's lightning indexer (docs/models.md, deepseek4): the compressed entries a CSA query
// attends to. Each visible entry k (w < (p + 1) / 4) scores Σ_h w_h · ReLU(q_h · k) / √Di with
// w_h = proj(x)_h / √Hi; the top_k highest are picked (ties to the lower entry). With no more than
// top_k visible entries, all of them are.
#include <cstdint>

namespace strata::engine {

// q: [Hi][Di] rotated indexer queries; w: [Hi] raw head weights; keys: entry 0's key (entry i at
// + i·Di). scores, order: n_visible floats / ints of caller scratch. picks: top_k entries in
// ascending order; returns their count (min(top_k, n_visible)). No allocation.
int ds4_indexer_pick(const float* q, const float* w, int heads, int dim, const float* keys, int64_t n_visible,
                     int top_k, float* scores, int32_t* order, int32_t* picks);

}  // namespace strata::engine
