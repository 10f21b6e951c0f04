// Unit tests of the engine's numeric pieces: RMSNorm, NEOX RoPE, the int8 K/V rule, the chunked
// softmax merge, and cell selection (incl. indexer ties).
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <limits>
#include <random>
#include <vector>

#include "strata/engine/attention_head.h"
#include "strata/engine/cell_select.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/kv_quant.h"
#include "strata/engine/ops.h"
#include "strata/engine/rope.h"
#include "strata/engine/vec_dot.h"
#include "strata/cpu/features.h"
#include "strata/util/fp16.h"

using namespace strata::engine;

namespace {
std::vector<float> rnd(std::mt19937& g, std::size_t n, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
}  // namespace

TEST(rms_norm_matches_formula) {
  std::mt19937 g(3);
  for (int n : {1, 7, 8, 64, 255, 2560}) {
    auto x = rnd(g, static_cast<std::size_t>(n), 3.0f);
    auto w = rnd(g, static_cast<std::size_t>(n));
    std::vector<float> out(static_cast<std::size_t>(n)), out_u(static_cast<std::size_t>(n));
    rms_norm(x.data(), n, 1e-6f, w.data(), out.data());
    rms_norm(x.data(), n, 1e-6f, nullptr, out_u.data());
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double r = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; ++i) {
      CHECK_NEAR(out[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(i)] * r * w[static_cast<std::size_t>(i)],
                 1e-5);
      CHECK_NEAR(out_u[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(i)] * r, 1e-5);
    }
    // In place gives the same bits.
    std::vector<float> y = x;
    rms_norm(y.data(), n, 1e-6f, w.data(), y.data());
    CHECK(y == out);
  }
}

TEST(rope_neox_matches_formula_and_leaves_tail) {
  std::mt19937 g(5);
  const int dh = 24, rd = 16;
  Rope rope(rd, 10000.0f);
  for (int64_t pos : {0, 1, 17, 1000, 30000}) {
    auto x = rnd(g, dh);
    std::vector<float> y = x, cs(rd);
    rope.angles(pos, cs.data());
    rope.apply(y.data(), cs.data());
    for (int i = 0; i < rd / 2; ++i) {
      const double th = double(pos) * double(1.0f / std::pow(10000.0f, float(2 * i) / float(rd)));
      const double a = x[static_cast<std::size_t>(i)], b = x[static_cast<std::size_t>(i + rd / 2)];
      CHECK_NEAR(y[static_cast<std::size_t>(i)], a * std::cos(th) - b * std::sin(th), 2e-4);
      CHECK_NEAR(y[static_cast<std::size_t>(i + rd / 2)], b * std::cos(th) + a * std::sin(th), 2e-4);
    }
    for (int i = rd; i < dh; ++i) CHECK_EQ(y[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(i)]);
  }
  // Position 0 is the identity.
  auto x = rnd(g, dh);
  std::vector<float> y = x, cs(rd);
  rope.angles(0, cs.data());
  rope.apply(y.data(), cs.data());
  CHECK(y == x);
}

TEST(kv_int8_rule_exact) {
  // Block 0: absmax 63.5 -> s = 0.5 exactly; 1.25/0.5 = 2.5 -> 2 (half to even), 1.75 -> 3.5 -> 4,
  // -0.75 -> -1.5 -> -2. Block 1 (16 elements, the short tail of Dh = 80): all zero -> s = 0, q = 0.
  std::vector<float> x(80, 0.0f);
  x[0] = 63.5f;
  x[1] = 1.25f;
  x[2] = 1.75f;
  x[3] = -0.75f;
  x[4] = -63.5f;
  std::vector<int8_t> q(80);
  std::vector<uint16_t> s(2);
  kv_quantize(x.data(), 80, q.data(), s.data());
  CHECK_EQ(strata::fp16_to_fp32(s[0]), 0.5f);
  CHECK_EQ(int(q[0]), 127);
  CHECK_EQ(int(q[1]), 2);
  CHECK_EQ(int(q[2]), 4);
  CHECK_EQ(int(q[3]), -2);
  CHECK_EQ(int(q[4]), -127);
  CHECK_EQ(s[1], uint16_t{0});
  for (int i = 64; i < 80; ++i) CHECK_EQ(int(q[static_cast<std::size_t>(i)]), 0);
  // Clamp: a tiny block whose scale is an fp16 subnormal rounded down (1e-5/127 -> 2^-24), so
  // absmax/s = 167.8 is clamped to 127; the negative side likewise.
  std::vector<float> y(64, 0.0f);
  y[0] = 1e-5f;
  y[1] = -1e-5f;
  kv_quantize(y.data(), 64, q.data(), s.data());
  CHECK(y[0] / strata::fp16_to_fp32(s[0]) > 127.5f);
  CHECK_EQ(int(q[0]), 127);
  CHECK_EQ(int(q[1]), -127);
  // General rule on random data, against a direct transcription of the contract.
  std::mt19937 g(9);
  for (int dh : {64, 100, 128, 256}) {
    auto v = rnd(g, static_cast<std::size_t>(dh), 2.0f);
    std::vector<int8_t> qq(static_cast<std::size_t>(dh));
    std::vector<uint16_t> ss(static_cast<std::size_t>(kv_blocks(dh)));
    kv_quantize(v.data(), dh, qq.data(), ss.data());
    std::vector<float> back(static_cast<std::size_t>(dh));
    kv_dequantize(qq.data(), ss.data(), dh, back.data());
    for (int b0 = 0; b0 < dh; b0 += 64) {
      const int b1 = std::min(dh, b0 + 64);
      float amax = 0;
      for (int i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(v[static_cast<std::size_t>(i)]));
      const float sc = strata::fp16_to_fp32(strata::fp32_to_fp16(amax / 127.0f));
      CHECK_EQ(strata::fp16_to_fp32(ss[static_cast<std::size_t>(b0 / 64)]), sc);
      for (int i = b0; i < b1; ++i) {
        const float expect = std::clamp(std::nearbyint(v[static_cast<std::size_t>(i)] / sc), -127.0f, 127.0f);
        CHECK_EQ(float(qq[static_cast<std::size_t>(i)]), expect);
        CHECK_EQ(back[static_cast<std::size_t>(i)], expect * sc);
      }
    }
    // kv_dot equals the dot with the dequantized vector up to rounding.
    auto a = rnd(g, static_cast<std::size_t>(dh));
    double ref = 0;
    for (int i = 0; i < dh; ++i) ref += double(a[static_cast<std::size_t>(i)]) * back[static_cast<std::size_t>(i)];
    CHECK_NEAR(kv_dot(vec_kernels(), a.data(), qq.data(), ss.data(), dh), ref, 1e-4 * (1 + std::fabs(ref)));
  }
}

// Plain softmax attention in double over the stored (dequantized) K/V.
static std::vector<double> plain_attention(const KvCells& kv, int layer, int head, const std::vector<float>& q,
                                           const std::vector<int32_t>& cells) {
  const int dh = kv.head_dim();
  std::vector<double> s(cells.size());
  std::vector<float> k(static_cast<std::size_t>(dh)), v(static_cast<std::size_t>(dh));
  for (std::size_t i = 0; i < cells.size(); ++i) {
    kv.read_k(layer, cells[i], head, k.data());
    double dot = 0;
    for (int j = 0; j < dh; ++j) dot += double(q[static_cast<std::size_t>(j)]) * k[static_cast<std::size_t>(j)];
    s[i] = dot / std::sqrt(double(dh));
  }
  const double m = *std::max_element(s.begin(), s.end());
  double den = 0;
  std::vector<double> out(static_cast<std::size_t>(dh), 0.0);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const double e = std::exp(s[i] - m);
    den += e;
    kv.read_v(layer, cells[i], head, v.data());
    for (int j = 0; j < dh; ++j) out[static_cast<std::size_t>(j)] += e * v[static_cast<std::size_t>(j)];
  }
  for (auto& o : out) o /= den;
  return out;
}

TEST(chunked_softmax_merge_matches_plain_softmax) {
  std::mt19937 g(11);
  for (auto type : {strata::model::KvType::F32, strata::model::KvType::Int8, strata::model::KvType::F16}) {
    const int dh = 40, hkv = 2, cells = 300;
    KvCells kv(2, cells, hkv, dh, type, 0);
    for (int c = 0; c < cells; ++c) {
      // Keys with very different magnitudes so chunk maxima differ widely.
      auto k = rnd(g, static_cast<std::size_t>(hkv * dh), c % 97 == 0 ? 6.0f : 1.0f);
      auto v = rnd(g, static_cast<std::size_t>(hkv * dh));
      kv.write(1, c, k.data(), v.data());
    }
    for (int len : {1, 63, 64, 65, 200, 300}) {
      std::vector<int32_t> list;
      for (int c = 0; c < cells && static_cast<int>(list.size()) < len; c += (len < 150 ? 2 : 1)) list.push_back(c);
      auto q = rnd(g, static_cast<std::size_t>(dh), 2.0f);
      std::vector<float> scores(list.size()), chunk(static_cast<std::size_t>(dh)), out(static_cast<std::size_t>(dh));
      attend_head(kv, 1, 1, q.data(), list.data(), static_cast<int64_t>(list.size()), scores.data(), chunk.data(),
                  out.data());
      auto ref = plain_attention(kv, 1, 1, q, list);
      for (int j = 0; j < dh; ++j) CHECK_NEAR(out[static_cast<std::size_t>(j)], ref[static_cast<std::size_t>(j)], 1e-5);
    }
    // Implicit list 0..n-1 equals the explicit one bitwise.
    std::vector<int32_t> all(130);
    std::iota(all.begin(), all.end(), 0);
    auto q = rnd(g, static_cast<std::size_t>(dh));
    std::vector<float> sc(130), ch(static_cast<std::size_t>(dh)), o1(static_cast<std::size_t>(dh)),
        o2(static_cast<std::size_t>(dh));
    attend_head(kv, 1, 0, q.data(), all.data(), 130, sc.data(), ch.data(), o1.data());
    attend_head(kv, 1, 0, q.data(), nullptr, 130, sc.data(), ch.data(), o2.data());
    CHECK(o1 == o2);
  }
}

// A GQA group attended together reads each cell once; every head must stay bitwise attend_head
// (decode, verification windows and prefill then agree whatever the grouping). Both ISAs, both
// K/V types, a head size of two int8 blocks with a tail (70), groups of 1..6 heads, lists around
// the softmax chunk size, the implicit list.
TEST(attend_group_equals_attend_head_bitwise) {
  std::mt19937 g(17);
  std::vector<strata::cpu::Isa> isas = {strata::cpu::Isa::Scalar};
  if (strata::cpu::isa_supported(strata::cpu::Isa::Avx2)) isas.push_back(strata::cpu::Isa::Avx2);
  if (strata::cpu::isa_supported(strata::cpu::Isa::Neon)) isas.push_back(strata::cpu::Isa::Neon);
  const strata::cpu::Isa was = strata::cpu::active_isa();
  for (auto type : {strata::model::KvType::F32, strata::model::KvType::Int8, strata::model::KvType::F16})
    for (int dh : {64, 70}) {
      const int hkv = 2, cells = 200;
      KvCells kv(1, cells, hkv, dh, type, 0);
      kv.prepare_write(0, 0, cells);
      for (int c = 0; c < cells; ++c) {
        auto k = rnd(g, static_cast<std::size_t>(hkv * dh), c % 31 == 0 ? 5.0f : 1.0f);
        auto v = rnd(g, static_cast<std::size_t>(hkv * dh));
        kv.write(0, c, k.data(), v.data());
      }
      for (strata::cpu::Isa isa : isas) {
        strata::cpu::force_isa(isa);
        for (int G = 1; G <= 6; ++G)
          for (int len : {1, 64, 65, 150}) {
            std::vector<int32_t> list;
            for (int c = 0; c < cells && static_cast<int>(list.size()) < len; c += 1 + (c % 3 == 0)) list.push_back(c);
            const int64_t n = static_cast<int64_t>(list.size());
            auto q = rnd(g, static_cast<std::size_t>(G * dh), 2.0f);
            std::vector<float> want(static_cast<std::size_t>(G * dh)), got(want.size(), 7.0f);
            std::vector<float> sc(static_cast<std::size_t>(G * n)), ch(static_cast<std::size_t>(G * dh));
            const float* qs[6];
            float* outs[6];
            for (int h = 0; h < G; ++h) {
              attend_head(kv, 0, 1, q.data() + h * dh, list.data(), n, sc.data(), ch.data(), want.data() + h * dh);
              qs[h] = q.data() + h * dh;
              outs[h] = got.data() + h * dh;
            }
            attend_group(kv, 0, 1, qs, G, list.data(), n, sc.data(), ch.data(), outs);
            CHECK_MSG(want == got, std::string(strata::cpu::isa_name(isa)) + " dh " + std::to_string(dh) + " G " +
                                       std::to_string(G) + " n " + std::to_string(n));
            attend_group(kv, 0, 0, qs, G, nullptr, n, sc.data(), ch.data(), outs);
            for (int h = 0; h < G; ++h)
              attend_head(kv, 0, 0, q.data() + h * dh, nullptr, n, sc.data(), ch.data(), want.data() + h * dh);
            CHECK(want == got);
          }
      }
    }
  strata::cpu::force_isa(was);
}

static std::vector<int32_t> select(const CellPolicy& pol, int64_t p, const std::vector<float>* scores) {
  std::vector<int32_t> out(static_cast<std::size_t>(p + 1) + 8), order(static_cast<std::size_t>(p + 1) + 8);
  const int64_t n = select_cells(pol, p, scores ? scores->data() : nullptr, order.data(), out.data());
  out.resize(static_cast<std::size_t>(n));
  return out;
}

TEST(cell_selection_rules) {
  // W = 0: every causal cell.
  CHECK((select({0, 0, 0}, 4, nullptr) == std::vector<int32_t>{0, 1, 2, 3, 4}));
  // Sinks and window overlapping at small p: each cell once, ascending.
  CellPolicy pol{3, 4, 2};
  CHECK((select(pol, 0, nullptr) == std::vector<int32_t>{0}));
  CHECK((select(pol, 5, nullptr) == std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // p = 10: sinks 0..2, window 7..10, candidates 3..6; no indexer -> no picks.
  CHECK((select(pol, 10, nullptr) == std::vector<int32_t>{0, 1, 2, 7, 8, 9, 10}));
  auto cand = indexer_candidates(pol, 10);
  CHECK_EQ(cand.begin, int64_t{3});
  CHECK_EQ(cand.end, int64_t{7});
  // Indexer picks: scores of cells 3,4,5,6 = 1, 5, 5, 2 -> top-2 = {4, 5}.
  std::vector<float> s1 = {1, 5, 5, 2};
  CHECK((select(pol, 10, &s1) == std::vector<int32_t>{0, 1, 2, 4, 5, 7, 8, 9, 10}));
  // Ties go to the lower cell id: all equal -> {3, 4}.
  std::vector<float> s2 = {7, 7, 7, 7};
  CHECK((select(pol, 10, &s2) == std::vector<int32_t>{0, 1, 2, 3, 4, 7, 8, 9, 10}));
  // A tie at the boundary: 9, 3, 3, 3 -> {3, 4}.
  std::vector<float> s3 = {9, 3, 3, 3};
  CHECK((select(pol, 10, &s3) == std::vector<int32_t>{0, 1, 2, 3, 4, 7, 8, 9, 10}));
  // NaN ranks last.
  std::vector<float> s4 = {NAN, 0, NAN, -1};
  CHECK((select(pol, 10, &s4) == std::vector<int32_t>{0, 1, 2, 4, 6, 7, 8, 9, 10}));
  // Fewer than T remaining candidates: all of them. p = 8: candidates 3..4.
  std::vector<float> s5 = {0, 0};
  CHECK((select(pol, 8, &s5) == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // No sinks.
  CellPolicy nos{0, 2, 1};
  std::vector<float> s6 = {0, 3, 1};
  CHECK((select(nos, 4, &s6) == std::vector<int32_t>{1, 3, 4}));
  CHECK(max_cells(pol, 1000) == 9);
  CHECK(max_cells({0, 0, 0}, 1000) == 1000);
}

// The indexer picks against the ranking written out (sort by score descending, NaN last, −0 equal
// to +0, ties to the lower id; take T; ascending), on random scores full of ties and specials.
TEST(cell_selection_matches_sorted_ranking) {
  std::mt19937 g(31);
  const float special[] = {NAN, -0.0f, 0.0f, INFINITY, -INFINITY, 1e-42f, -1e-42f};
  for (int trial = 0; trial < 300; ++trial) {
    const CellPolicy pol{static_cast<int64_t>(g() % 5), 1 + static_cast<int64_t>(g() % 40),
                         1 + static_cast<int64_t>(g() % 70)};
    const int64_t p = static_cast<int64_t>(g() % 400);
    const Candidates cand = indexer_candidates(pol, p);
    std::vector<float> sc(static_cast<std::size_t>(cand.size()));
    const int levels = 1 + static_cast<int>(g() % 20);  // few levels: many ties
    for (auto& x : sc) x = g() % 9 == 0 ? special[g() % 7] : static_cast<float>(static_cast<int>(g() % levels) - 5);
    std::vector<int32_t> want;
    for (int64_t c = 0; c < std::min(cand.begin, std::max<int64_t>(p - pol.window + 1, 0)); ++c)
      want.push_back(static_cast<int32_t>(c));
    std::vector<int32_t> idx(sc.size());
    std::iota(idx.begin(), idx.end(), 0);
    auto key = [&sc](int32_t i) {
      return std::isnan(sc[static_cast<std::size_t>(i)]) ? -INFINITY : sc[static_cast<std::size_t>(i)];
    };
    std::stable_sort(idx.begin(), idx.end(), [&key](int32_t a, int32_t b) { return key(a) > key(b); });
    idx.resize(std::min<std::size_t>(idx.size(), static_cast<std::size_t>(pol.top_k)));
    std::sort(idx.begin(), idx.end());
    for (int32_t i : idx) want.push_back(static_cast<int32_t>(cand.begin + i));
    for (int64_t c = std::max<int64_t>(p - pol.window + 1, 0); c <= p; ++c) want.push_back(static_cast<int32_t>(c));
    CHECK_MSG(select(pol, p, &sc) == want, "trial " + std::to_string(trial));
  }
}

TEST(indexer_score_formula) {
  std::mt19937 g(2);
  const int hi = 3, di = 10;
  auto q = rnd(g, hi * di), w = rnd(g, hi), k = rnd(g, di);
  double ref = 0;
  for (int j = 0; j < hi; ++j) {
    double dot = 0;
    for (int i = 0; i < di; ++i)
      dot += double(q[static_cast<std::size_t>(j * di + i)]) * k[static_cast<std::size_t>(i)];
    ref += w[static_cast<std::size_t>(j)] * std::max(dot, 0.0);
  }
  CHECK_NEAR(indexer_score(vec_kernels(), q.data(), w.data(), hi, di, k.data()), ref, 1e-5);
}

TEST(softmax_and_activations) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, -100.0f};
  softmax(x.data(), 4);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(-100.0);
  CHECK_NEAR(x[2], std::exp(3.0) / z, 1e-7);
  CHECK_NEAR(sigmoid(0.0f), 0.5, 1e-7);
  CHECK_NEAR(silu(2.0f), 2.0 / (1.0 + std::exp(-2.0)), 1e-6);
}

namespace {
// The VecKernels of every ISA path this machine runs, the scalar one first.
std::vector<const VecKernels*> vec_paths() {
  std::vector<const VecKernels*> paths = {&vec_kernels_scalar()};
#if defined(STRATA_HAVE_AVX2_TU)
  if (strata::cpu::isa_supported(strata::cpu::Isa::Avx2)) paths.push_back(&vec_kernels_avx2());
#endif
#if defined(STRATA_HAVE_AVX512_TU)
  if (strata::cpu::isa_supported(strata::cpu::Isa::Avx512)) paths.push_back(&vec_kernels_avx512());
#endif
  return paths;
}
}  // namespace

TEST(vec_kernels_isa_paths_are_bitwise_equal) {
  std::mt19937 g(13);
  const VecKernels& sc = vec_kernels_scalar();
  const std::vector<const VecKernels*> paths = vec_paths();
  for (int64_t n : {0, 1, 7, 8, 9, 63, 64, 65, 100, 256}) {
    auto a = rnd(g, static_cast<std::size_t>(n) + 1), b = rnd(g, static_cast<std::size_t>(n) + 1);
    std::vector<int8_t> q(static_cast<std::size_t>(n) + 1);
    for (auto& v : q) v = static_cast<int8_t>(static_cast<int>(g() % 255) - 127);
    // The documented order, written out.
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      const float p = a[static_cast<std::size_t>(i)] * b[static_cast<std::size_t>(i)];
      acc[i < (n / 8) * 8 ? i % 8 : i - (n / 8) * 8] += p;
    }
    const float want = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    // The fused order: the same lanes and tree, each product added by one fma.
    float facc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      float& l = facc[i < (n / 8) * 8 ? i % 8 : i - (n / 8) * 8];
      l = std::fma(a[static_cast<std::size_t>(i)], b[static_cast<std::size_t>(i)], l);
    }
    const float want_fused = ((facc[0] + facc[1]) + (facc[2] + facc[3])) + ((facc[4] + facc[5]) + (facc[6] + facc[7]));
    std::vector<float> want_axpy = b;
    for (int64_t i = 0; i < n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      want_axpy[u] = std::fma(0.37f, a[u], want_axpy[u]);
    }
    for (const VecKernels* k : paths) {
      CHECK_EQ(k->dot_f32(a.data(), b.data(), n), want);
      CHECK_EQ(k->dot_f32_fused(a.data(), b.data(), n), want_fused);
      {
        std::vector<float> o = b;
        k->axpy_f32_fused(0.37f, a.data(), n, o.data());
        CHECK(o == want_axpy);
      }
      CHECK_EQ(k->dot_i8(a.data(), q.data(), n), sc.dot_i8(a.data(), q.data(), n));
      std::vector<float> o1 = b, o2 = b;
      k->axpy_f32(0.37f, a.data(), n, o1.data());
      sc.axpy_f32(0.37f, a.data(), n, o2.data());
      CHECK(o1 == o2);
      k->axpy_i8(-1.25f, q.data(), n, o1.data());
      sc.axpy_i8(-1.25f, q.data(), n, o2.data());
      CHECK(o1 == o2);
    }
  }
  CHECK(paths.size() >= 1);
}

// first_above (the sampler's vocabulary scans) on every ISA path against the written rule: the first
// x > floor, NaN or +inf; n if none. Floors -inf, finite and NaN; every length around the vector widths;
// the hit in the body, the tail or nowhere.
TEST(first_above_isa_paths_match_the_rule) {
  std::mt19937 g(17);
  const std::vector<const VecKernels*> paths = vec_paths();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  int checked = 0;
  for (int64_t n = 0; n <= 70; ++n)
    for (int trial = 0; trial < 24; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(n) + 1);
      for (auto& v : x) v = static_cast<float>(static_cast<int>(g() % 11)) - 5.0f;  // ties with the floor
      if (n > 0 && trial % 4 == 1) x[g() % static_cast<std::size_t>(n)] = trial % 8 == 1 ? nan : inf;
      if (n > 0 && trial % 4 == 2) x[g() % static_cast<std::size_t>(n)] = -inf;
      const float floor = trial % 6 == 0 ? -inf : trial % 6 == 5 ? nan : static_cast<float>(trial % 5) - 1.0f;
      int64_t want = n;
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[static_cast<std::size_t>(i)];
        if (v > floor || !(v < inf)) {
          want = i;
          break;
        }
      }
      for (const VecKernels* k : paths) CHECK_EQ(k->first_above(x.data(), n, floor), want);
      ++checked;
    }
  CHECK(checked > 1000);
}

// first_argmax (the greedy sampler's argmax, the drafter's token) on every ISA path against a scan that
// compares every element: the first largest, a NaN never winning (also as x[0]), +inf and -inf, ties.
TEST(first_argmax_isa_paths_match_a_full_scan) {
  std::mt19937 g(23);
  const std::vector<const VecKernels*> paths = vec_paths();
  int checked = 0;
  for (int64_t n = 1; n <= 90; ++n)
    for (int trial = 0; trial < 16; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(n));
      for (auto& v : x) v = static_cast<float>(static_cast<int>(g() % 7));  // many ties
      const auto at = [&] { return static_cast<std::size_t>(g() % static_cast<std::size_t>(n)); };
      if (trial % 5 == 1) x[at()] = NAN;
      if (trial % 5 == 2) x[0] = NAN;
      if (trial % 5 == 3) x[at()] = INFINITY;
      if (trial % 5 == 4) x[at()] = -INFINITY;
      if (trial % 8 == 7) std::fill(x.begin(), x.end(), -INFINITY);
      int64_t want = 0;
      for (int64_t i = 1; i < n; ++i)
        if (x[static_cast<std::size_t>(i)] > x[static_cast<std::size_t>(want)]) want = i;
      for (const VecKernels* k : paths) CHECK_EQ(first_argmax(*k, x.data(), n), want);
      ++checked;
    }
  CHECK(checked > 1000);
}

// max and shift_by_max (the attention softmax's maxima and shifts) on every ISA path against the written
// rule: the largest element, NaNs passed over (all-NaN and empty give -inf), a zero maximum as +0 whichever
// zeros tie, then y = x - max. Every length around the vector widths and the four-register body;
// infinities, NaN, ties, zeros of both signs; in place.
TEST(max_and_shift_isa_paths_match_the_rule) {
  std::mt19937 g(37);
  std::uniform_real_distribution<float> score(-30.0f, 30.0f);
  const std::vector<const VecKernels*> paths = vec_paths();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  int checked = 0;
  for (int64_t n = 0; n <= 100; ++n)
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(n) + 1);
      for (auto& v : x) v = trial % 5 == 4 ? static_cast<float>(static_cast<int>(g() % 3)) : score(g);
      const auto at = [&] { return static_cast<std::size_t>(g() % static_cast<std::size_t>(n)); };
      if (n > 0 && trial % 5 == 1) x[at()] = nan;
      if (n > 0 && trial % 5 == 2) x[at()] = trial % 2 ? inf : -inf;
      if (n > 0 && trial % 5 == 3) {  // all NaN, or zeros of both signs tying for the maximum
        for (auto& v : x) v = trial % 2 ? nan : (g() % 3 == 0 ? -1.0f : g() % 2 ? 0.0f : -0.0f);
      }
      float want = -inf;
      for (int64_t i = 0; i < n; ++i) want = std::max(want, x[static_cast<std::size_t>(i)]);
      want = want + 0.0f;  // a zero maximum is +0
      for (const VecKernels* k : paths) {
        const float got = k->max(x.data(), n);
        CHECK(got == want || (std::isnan(got) && std::isnan(want)));
        std::vector<float> y(static_cast<std::size_t>(n) + 1, 7.0f), z = x;
        const float m = k->shift_by_max(x.data(), n, y.data());
        const float m2 = k->shift_by_max(z.data(), n, z.data());  // in place
        CHECK(std::memcmp(&m, &want, 4) == 0 || (std::isnan(m) && std::isnan(want)));
        CHECK(std::memcmp(&m2, &m, 4) == 0);
        for (int64_t i = 0; i < n; ++i) {
          const float e = x[static_cast<std::size_t>(i)] - want;
          const float a = y[static_cast<std::size_t>(i)], b = z[static_cast<std::size_t>(i)];
          CHECK((std::memcmp(&a, &e, 4) == 0 && std::memcmp(&b, &e, 4) == 0) ||
                (std::isnan(e) && std::isnan(a) && std::isnan(b)));
        }
        CHECK_EQ(y[static_cast<std::size_t>(n)], 7.0f);  // nothing written past n
      }
      ++checked;
    }
  CHECK(checked == 1010);
}

// to_fp16 (the fp16 K/V cells' writes) on every ISA path bitwise equal to util/fp16.h's fp32_to_fp16:
// random bit patterns (NaNs with payloads, subnormals, infinities), values at halfway points of fp16's
// rounding, overflow, and every length around the vector width.
TEST(to_fp16_isa_paths_match_the_scalar_rule) {
  std::mt19937 g(41);
  const std::vector<const VecKernels*> paths = vec_paths();
  std::vector<float> x;
  for (int i = 0; i < 40000; ++i) {
    const uint32_t u = static_cast<uint32_t>(g());
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  for (int i = 0; i < 4000; ++i) {  // fp16 values and the halfway points between neighbours
    const uint16_t h = static_cast<uint16_t>(g());
    const float a = strata::fp16_to_fp32(h), b = strata::fp16_to_fp32(static_cast<uint16_t>(h + 1));
    x.push_back(a);
    x.push_back(0.5f * a + 0.5f * b);
  }
  for (float v : {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 1e-8f, -3e-5f, 6.1e-5f}) x.push_back(v);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x.push_back(nan);
  x.push_back(-nan);
  std::vector<uint16_t> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = strata::fp32_to_fp16(x[i]);
  for (const VecKernels* k : paths) {
    std::vector<uint16_t> got(x.size());
    k->to_fp16(x.data(), got.data(), static_cast<int64_t>(x.size()));
    CHECK(got == want);
    for (int64_t n = 0; n <= 20; ++n) {  // short calls: the tail, nothing written past n
      std::vector<uint16_t> y(static_cast<std::size_t>(n) + 1, 0xABCD);
      k->to_fp16(x.data() + 3, y.data(), n);
      for (int64_t i = 0; i < n; ++i) CHECK_EQ(y[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i) + 3]);
      CHECK_EQ(y[static_cast<std::size_t>(n)], 0xABCD);
    }
  }
}

// exp_sum (a softmax's normaliser, the speculator's greedy peak) on every ISA path bitwise equal to its
// written rule: 16 float partial sums, lane l taking exp_f32(x[i] - ref) for i = l mod 16 in order, then the
// fixed tree. Every length around the vector widths; refs below, at and above the values; NaN and infinities.
TEST(exp_sum_isa_paths_match_the_rule) {
  std::mt19937 g(31);
  std::uniform_real_distribution<float> logit(-20.0f, 8.0f);
  const std::vector<const VecKernels*> paths = vec_paths();
  int checked = 0;
  for (int64_t n = 0; n <= 70; ++n)
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(n) + 1);
      for (auto& v : x) v = logit(g);
      if (n > 0 && trial % 6 == 1) x[g() % static_cast<std::size_t>(n)] = -INFINITY;
      if (n > 0 && trial % 6 == 2) x[g() % static_cast<std::size_t>(n)] = 200.0f;  // an overflowing term
      if (n > 0 && trial % 6 == 3) x[g() % static_cast<std::size_t>(n)] = NAN;
      const float ref = trial % 4 == 0 ? 0.0f : trial % 4 == 1 ? 8.0f : trial % 4 == 2 ? -30.0f : x[0];
      float lanes[16] = {};
      for (int64_t i = 0; i < n; ++i) {
        const float e = exp_f32(x[static_cast<std::size_t>(i)] - ref);
        lanes[i % 16] = lanes[i % 16] + e;
      }
      const float want = reduce_exp_lanes(lanes);
      for (const VecKernels* k : paths) {
        const float got = k->exp_sum(x.data(), n, ref);
        CHECK(got == want || (std::isnan(got) && std::isnan(want)));
      }
      ++checked;
    }
  CHECK(checked > 800);
  // A softmax normaliser: against a double sum of the same terms.
  std::vector<float> row(8192);
  for (auto& v : row) v = logit(g);
  const float top = *std::max_element(row.begin(), row.end());
  double z = 0.0;
  for (const float v : row) z += std::exp(static_cast<double>(v) - static_cast<double>(top));
  for (const VecKernels* k : paths) CHECK_NEAR(k->exp_sum(row.data(), 8192, top), z, 1e-5 * z);
}

// exp_f32 against the exact value (double), and the SwiGLU / exp kernels of every ISA path bitwise
// equal to the scalar function lane for lane, special values included.
TEST(exp_f32_accuracy_and_swiglu_kernels_bitwise) {
  double worst_ulp = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.01371f) {
    const double r = std::exp(static_cast<double>(x));
    const float rf = static_cast<float>(r);
    const double ulp = std::nextafter(rf, INFINITY) - rf;
    worst_ulp = std::max(worst_ulp, std::fabs(static_cast<double>(exp_f32(x)) - r) / ulp);
  }
  CHECK_MSG(worst_ulp <= 2.0, "exp_f32 worst " + std::to_string(worst_ulp) + " ulp");
  CHECK_EQ(exp_f32(0.0f), 1.0f);
  CHECK_EQ(exp_f32(-0.0f), 1.0f);
  CHECK_EQ(exp_f32(-90.0f), 0.0f);
  CHECK_EQ(exp_f32(-INFINITY), 0.0f);
  CHECK(std::isinf(exp_f32(89.0f)) && std::isinf(exp_f32(INFINITY)));
  CHECK(std::isnan(exp_f32(NAN)));
  CHECK_NEAR(silu(2.0f), 2.0 / (1.0 + std::exp(-2.0)), 1e-6);

  std::mt19937 g(29);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f);
  const std::vector<const VecKernels*> paths = vec_paths();
  const float special[] = {0.0f, -0.0f, -87.0f, -87.0001f, 88.0f, 88.0001f, -INFINITY, INFINITY, 1e-40f, -3.5f};
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 64, 100, 1000}) {
    std::vector<float> x(static_cast<std::size_t>(n)), u(static_cast<std::size_t>(n));
    for (auto& v : x) v = wide(g);
    for (auto& v : u) v = wide(g);
    for (std::size_t i = 0; i < std::size(special) && i < x.size(); ++i) x[i * 7 % x.size()] = special[i];
    std::vector<float> want_e(x.size()), want_h(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      want_e[i] = exp_f32(x[i]);
      want_h[i] = silu(x[i]) * u[i];
    }
    for (const VecKernels* k : paths) {
      std::vector<float> e(x.size()), h(x.size());
      k->exp(x.data(), e.data(), n);
      k->swiglu(x.data(), u.data(), h.data(), n);
      CHECK(std::memcmp(e.data(), want_e.data(), e.size() * 4) == 0);
      CHECK(std::memcmp(h.data(), want_h.data(), h.size() * 4) == 0);
      std::vector<float> in_place = x;  // h may alias g (dense_ffn, moe write the gate rows in place)
      k->swiglu(in_place.data(), u.data(), in_place.data(), n);
      CHECK(std::memcmp(in_place.data(), want_h.data(), h.size() * 4) == 0);
    }
  }
  // NaN in, NaN out (not a finite number that hides a broken activation).
  for (const VecKernels* k : paths) {
    std::vector<float> x(9, 1.0f), e(9);
    x[3] = NAN;
    k->exp(x.data(), e.data(), 9);
    CHECK(std::isnan(e[3]) && e[2] == exp_f32(1.0f));
  }
}

TEST(kv_cells_gap_reads_zero) {
  for (auto type : {strata::model::KvType::F32, strata::model::KvType::Int8, strata::model::KvType::F16}) {
    KvCells kv(2, 32, 2, 70, type, 8);
    std::vector<float> k(140, 1.5f), v(140, -2.0f), out(70);
    kv.prepare_write(1, 10, 2);
    kv.write(1, 10, k.data(), v.data());
    kv.write(1, 11, k.data(), v.data());
    for (int c = 0; c < 10; ++c) {
      kv.read_k(1, c, 1, out.data());
      CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; }));
      const float* ik = kv.indexer_key(1, c);
      CHECK(std::all_of(ik, ik + 8, [](float x) { return x == 0.0f; }));
    }
    kv.read_v(1, 11, 0, out.data());
    CHECK_NEAR(out[69], -2.0, 1e-2);
    CHECK_THROWS(kv.prepare_write(1, 31, 2));  // beyond the store
  }
}
