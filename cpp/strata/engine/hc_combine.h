#pragma once
// The fused "combine" step of SPEC §2.3: after the MoE of a layer, the routed-plus-shared
// expert output is formed once per dimension,
//   y[i] = Σ_k w_k · routed_k[i]  (+ g · shared[i] when a shared expert is applied),
// and applied to every stream through the hyper-connection's expand,
//   X'_s[i] = post_s · y[i] + Σ_j comb[j][s] · X_j[i]   (j ascending),
// so each stream keeps its own element order and reduction order. n = 1 with post = comb = 1 is
// the plain residual X + y (multiplying by 1 is exact). x_out may alias x_in. The same function with
// k = 1, w = 1 and no shared part expands the attention output.
//
// A fixed-shape fast path for (d = 2560, n = 4) is selected by shape; it is bitwise equal to the
// generic path (tests/cpp/test_hc_combine.cpp checks the grid of SPEC §2.3). The generic path itself
// compiles the stream counts 1, 2 and 4 as fixed shapes too (any d: whole 16-element tiles, then the
// tail), since a runtime-shaped inner loop cost ~7 % of a demo-model decode step.
#include <cstdint>

namespace strata::engine {

struct CombineArgs {
  int64_t d = 0;
  int n = 1;                           // streams
  int n_tok = 1;                       // tokens (rows), each independent
  int k = 0;                           // routed outputs per token
  const float* routed = nullptr;       // [n_tok][k][d]
  const float* weights = nullptr;      // [n_tok][k]
  const float* shared = nullptr;       // [n_tok][d]; nullptr = no shared expert applied
  const float* shared_gate = nullptr;  // [n_tok] (σ already applied)
  const float* post = nullptr;         // [n_tok][n]
  const float* comb = nullptr;         // [n_tok][n][n]
  const float* x_in = nullptr;         // [n_tok][n][d]
  float* x_out = nullptr;              // [n_tok][n][d]
};

// Dispatches to the fast path when the shape has one, else the generic path.
void hc_combine(const CombineArgs& a);
// Each path on its own (tests).
void hc_combine_generic(const CombineArgs& a);
bool hc_combine_has_fast_path(int64_t d, int n);
void hc_combine_fast(const CombineArgs& a);  // requires hc_combine_has_fast_path(a.d, a.n)

}  // namespace strata::engine
