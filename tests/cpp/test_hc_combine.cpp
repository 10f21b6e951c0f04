// R-5 (SPEC §2.3): the combine forms routed + shared once per dimension and applies it to every
// stream; the fixed-shape (d = 2560, n = 4) fast path is bitwise equal to the generic path. Grid:
// d ∈ {255, 2560, 2817}, shared expert applied off/on, in place off/on, 1..8 tokens, all streams,
// and both paths against a scalar transcription of the formula.
// The scalar reference must keep every multiply and add separate too (-march=native builds).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "strata/engine/hc_combine.h"

using namespace strata::engine;

namespace {
std::vector<float> rnd(std::mt19937& g, std::size_t n, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Exactly the documented order in float: y = Σ_k w_k r_k (+ g s); out = post·y + Σ_j comb[j][s] x_j.
void scalar_combine(const CombineArgs& a) {
  const int64_t d = a.d;
  const int n = a.n;
  std::vector<float> x(static_cast<std::size_t>(n));
  for (int t = 0; t < a.n_tok; ++t)
    for (int64_t i = 0; i < d; ++i) {
      float y = 0.0f;
      for (int k = 0; k < a.k; ++k) {
        const float prod = a.weights[t * a.k + k] * a.routed[(static_cast<int64_t>(t) * a.k + k) * d + i];
        y = y + prod;
      }
      if (a.shared) {
        const float prod = a.shared_gate[t] * a.shared[t * d + i];
        y = y + prod;
      }
      for (int j = 0; j < n; ++j) x[static_cast<std::size_t>(j)] = a.x_in[(static_cast<int64_t>(t) * n + j) * d + i];
      for (int s = 0; s < n; ++s) {
        float acc = a.post[t * n + s] * y;
        for (int j = 0; j < n; ++j) {
          const float prod = a.comb[(t * n + j) * n + s] * x[static_cast<std::size_t>(j)];
          acc = acc + prod;
        }
        a.x_out[(static_cast<int64_t>(t) * n + s) * d + i] = acc;
      }
    }
}
}  // namespace

TEST(combine_fast_path_is_bitwise_generic_grid) {
  std::mt19937 g(7);
  int fast_cases = 0;
  for (int64_t d : {255, 2560, 2817}) {
    for (int n : {1, 2, 4}) {
      for (bool shared : {false, true}) {
        for (bool in_place : {false, true}) {
          for (int tokens = 1; tokens <= 8; ++tokens) {
            const int k = 10;
            auto routed = rnd(g, static_cast<std::size_t>(tokens * k * d));
            auto w = rnd(g, static_cast<std::size_t>(tokens * k), 0.3f);
            auto sh = rnd(g, static_cast<std::size_t>(tokens * d));
            auto gate = rnd(g, static_cast<std::size_t>(tokens));
            auto post = rnd(g, static_cast<std::size_t>(tokens * n));
            auto comb = rnd(g, static_cast<std::size_t>(tokens * n * n));
            auto x = rnd(g, static_cast<std::size_t>(tokens * n * d));
            CombineArgs a;
            a.d = d;
            a.n = n;
            a.n_tok = tokens;
            a.k = k;
            a.routed = routed.data();
            a.weights = w.data();
            a.shared = shared ? sh.data() : nullptr;
            a.shared_gate = shared ? gate.data() : nullptr;
            a.post = post.data();
            a.comb = comb.data();
            std::vector<float> ref(x.size()), gen(x.size()), fast(x.size());
            a.x_in = x.data();
            a.x_out = ref.data();
            scalar_combine(a);
            if (in_place) {
              gen = x;
              a.x_in = a.x_out = gen.data();
            } else {
              a.x_out = gen.data();
            }
            hc_combine_generic(a);
            CHECK(std::memcmp(gen.data(), ref.data(), gen.size() * 4) == 0);
            if (hc_combine_has_fast_path(d, n)) {
              ++fast_cases;
              if (in_place) {
                fast = x;
                a.x_in = a.x_out = fast.data();
              } else {
                a.x_in = x.data();
                a.x_out = fast.data();
              }
              hc_combine_fast(a);
              CHECK_MSG(std::memcmp(fast.data(), gen.data(), gen.size() * 4) == 0,
                        "d=" + std::to_string(d) + " tokens=" + std::to_string(tokens));
              // The dispatcher picks the fast path and gives the same bits.
              std::vector<float> disp(x.size());
              a.x_in = x.data();
              a.x_out = disp.data();
              hc_combine(a);
              CHECK(std::memcmp(disp.data(), gen.data(), gen.size() * 4) == 0);
            }
          }
        }
      }
    }
  }
  CHECK_EQ(fast_cases, 2 * 2 * 8);
  CHECK(hc_combine_has_fast_path(2560, 4));
  CHECK(!hc_combine_has_fast_path(2817, 4));
  CHECK(!hc_combine_has_fast_path(2560, 2));
  CHECK_THROWS([] {
    CombineArgs a;
    a.d = 255;
    a.n = 4;
    hc_combine_fast(a);
  }());
}
