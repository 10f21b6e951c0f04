// Hyper-connections against a plain scalar (double) transcription of docs/gguf.md §2 /
// transformers' DeepseekV4HyperConnection and DeepseekV4HyperHead.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <random>
#include <vector>

#include "strata/engine/hc_combine.h"
#include "strata/engine/hyper_connections.h"

using namespace strata::engine;

namespace {
std::vector<float> rnd(std::mt19937& g, std::size_t n, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct RefCoef {
  std::vector<double> pre, post, comb;
};

RefCoef ref_coefficients(const std::vector<float>& mix, const std::vector<float>& scale, const std::vector<float>& base,
                         int n, int iters, double eps) {
  RefCoef r;
  r.pre.resize(static_cast<std::size_t>(n));
  r.post.resize(static_cast<std::size_t>(n));
  r.comb.resize(static_cast<std::size_t>(n * n));
  for (int s = 0; s < n; ++s) {
    r.pre[static_cast<std::size_t>(s)] =
        sig(mix[static_cast<std::size_t>(s)] * double(scale[0]) + base[static_cast<std::size_t>(s)]) + eps;
    r.post[static_cast<std::size_t>(s)] =
        2 * sig(mix[static_cast<std::size_t>(n + s)] * double(scale[1]) + base[static_cast<std::size_t>(n + s)]);
  }
  auto C = [&](int j, int k) -> double& { return r.comb[static_cast<std::size_t>(j * n + k)]; };
  for (int j = 0; j < n; ++j) {
    double m = -1e300;
    std::vector<double> v(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(2 * n + j * n + k);
      v[static_cast<std::size_t>(k)] = mix[i] * double(scale[2]) + base[i];
      m = std::max(m, v[static_cast<std::size_t>(k)]);
    }
    double z = 0;
    for (auto& x : v) z += std::exp(x - m);
    for (int k = 0; k < n; ++k) C(j, k) = std::exp(v[static_cast<std::size_t>(k)] - m) / z + eps;
  }
  auto cols = [&] {
    for (int k = 0; k < n; ++k) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += C(j, k);
      for (int j = 0; j < n; ++j) C(j, k) /= (s + eps);
    }
  };
  auto rows = [&] {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += C(j, k);
      for (int k = 0; k < n; ++k) C(j, k) /= (s + eps);
    }
  };
  cols();
  for (int it = 1; it < iters; ++it) {
    rows();
    cols();
  }
  return r;
}
}  // namespace

TEST(hc_coefficients_match_scalar_formula) {
  std::mt19937 g(1);
  for (int n : {2, 3, 4, 6}) {
    for (int iters : {1, 2, 5, 20}) {
      const int m = (2 + n) * n;
      auto mix = rnd(g, static_cast<std::size_t>(m), 2.0f), base = rnd(g, static_cast<std::size_t>(m)),
           scale = rnd(g, 3);
      std::vector<float> pre(static_cast<std::size_t>(n)), post(static_cast<std::size_t>(n)),
          comb(static_cast<std::size_t>(n * n));
      hc_coefficients(mix.data(), scale.data(), base.data(), n, iters, 1e-6f, pre.data(), post.data(), comb.data());
      auto ref = ref_coefficients(mix, scale, base, n, iters, 1e-6);
      for (int s = 0; s < n; ++s) {
        CHECK_NEAR(pre[static_cast<std::size_t>(s)], ref.pre[static_cast<std::size_t>(s)], 1e-6);
        CHECK_NEAR(post[static_cast<std::size_t>(s)], ref.post[static_cast<std::size_t>(s)], 1e-6);
      }
      for (int i = 0; i < n * n; ++i)
        CHECK_NEAR(comb[static_cast<std::size_t>(i)], ref.comb[static_cast<std::size_t>(i)], 1e-5);
      // Columns of the final matrix sum to ~1 (the last normalisation is by columns).
      for (int k = 0; k < n; ++k) {
        double s = 0;
        for (int j = 0; j < n; ++j) s += comb[static_cast<std::size_t>(j * n + k)];
        CHECK_NEAR(s, 1.0, 1e-4);
      }
    }
  }
}

TEST(hc_head_pre_matches_formula) {
  std::mt19937 g(2);
  const int n = 4;
  auto mix = rnd(g, n), base = rnd(g, n), scale = rnd(g, 1);
  std::vector<float> pre(n);
  hc_head_pre(mix.data(), scale.data(), base.data(), n, 1e-3f, pre.data());
  for (int s = 0; s < n; ++s)
    CHECK_NEAR(pre[static_cast<std::size_t>(s)],
               sig(mix[static_cast<std::size_t>(s)] * double(scale[0]) + base[static_cast<std::size_t>(s)]) + 1e-3,
               1e-6);
}

TEST(hc_collapse_and_expand_match_scalar_formula) {
  std::mt19937 g(3);
  for (int n : {1, 2, 4, 5}) {
    for (int64_t d : {1, 17, 64, 255}) {
      auto X = rnd(g, static_cast<std::size_t>(n * d));
      auto pre = rnd(g, static_cast<std::size_t>(n));
      std::vector<float> col(static_cast<std::size_t>(d));
      hc_collapse(X.data(), n, d, pre.data(), col.data());
      for (int64_t i = 0; i < d; ++i) {
        double ref = 0;
        for (int s = 0; s < n; ++s)
          ref += double(pre[static_cast<std::size_t>(s)]) * X[static_cast<std::size_t>(s * d + i)];
        CHECK_NEAR(col[static_cast<std::size_t>(i)], ref, 1e-5);
      }
      // Expand: X'_k = post_k·y + Σ_j comb[j][k]·X_j.
      auto y = rnd(g, static_cast<std::size_t>(d)), post = rnd(g, static_cast<std::size_t>(n)),
           comb = rnd(g, static_cast<std::size_t>(n * n));
      std::vector<float> one = {1.0f}, out(static_cast<std::size_t>(n * d));
      CombineArgs a;
      a.d = d;
      a.n = n;
      a.k = 1;
      a.routed = y.data();
      a.weights = one.data();
      a.post = post.data();
      a.comb = comb.data();
      a.x_in = X.data();
      a.x_out = out.data();
      hc_combine(a);
      for (int k = 0; k < n; ++k)
        for (int64_t i = 0; i < d; ++i) {
          double ref = double(post[static_cast<std::size_t>(k)]) * y[static_cast<std::size_t>(i)];
          for (int j = 0; j < n; ++j)
            ref += double(comb[static_cast<std::size_t>(j * n + k)]) * X[static_cast<std::size_t>(j * d + i)];
          CHECK_NEAR(out[static_cast<std::size_t>(k * d + i)], ref, 1e-5);
        }
      // In place gives the same bits.
      std::vector<float> Xi = X;
      a.x_in = Xi.data();
      a.x_out = Xi.data();
      hc_combine(a);
      CHECK(Xi == out);
    }
  }
}

TEST(hc_n1_is_plain_residual) {
  // n = 1 with post = comb = 1 is exactly X + y (the plain pre-norm residual).
  std::mt19937 g(4);
  const int64_t d = 100;
  auto X = rnd(g, d), y = rnd(g, d);
  std::vector<float> one = {1.0f}, out(d);
  CombineArgs a;
  a.d = d;
  a.n = 1;
  a.k = 1;
  a.routed = y.data();
  a.weights = one.data();
  a.post = one.data();
  a.comb = one.data();
  a.x_in = X.data();
  a.x_out = out.data();
  hc_combine(a);
  for (int64_t i = 0; i < d; ++i)
    CHECK_EQ(out[static_cast<std::size_t>(i)], X[static_cast<std::size_t>(i)] + y[static_cast<std::size_t>(i)]);
}
