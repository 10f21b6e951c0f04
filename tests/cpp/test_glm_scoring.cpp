// Sigmoid routing with a selection bias (routing/glm_scoring.h, glm4moe): hand-worked rows checked
// against the formula of transformers' Glm4MoeTopkRouter (bias only for the choice; weights from
// the unbiased scores, renormalised, times the scaling factor), and the MOCE decision (the resident
// bonus multiplies the selection scores, shifted to be >= 0 first when one is negative).
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "strata/routing/glm_scoring.h"

using strata::routing::MoceParams;
using strata::routing::sigmoid_route_row;
using strata::routing::SigmoidRouting;

namespace {

float sig(float x) { return 1.0f / (1.0f + std::exp(-x)); }

struct Out {
  int32_t ids[4];
  float w[4];
};

Out route(std::vector<float> logits, const std::vector<float>& bias, int k, bool norm, float scale,
          const uint8_t* resident = nullptr, MoceParams p = {}) {
  std::vector<float> sel(logits.size());
  Out o{};
  SigmoidRouting sr{bias.empty() ? nullptr : bias.data(), norm, scale};
  sigmoid_route_row(logits.data(), sel.data(), static_cast<int>(logits.size()), k, sr, resident, p, false, o.ids, o.w);
  return o;
}

}  // namespace

TEST(bias_chooses_weights_do_not) {
  // Scores σ(l): expert 0 is best unbiased, but the bias moves experts 2 and 3 ahead.
  const std::vector<float> logits{2.0f, 1.0f, 0.0f, -0.5f, -3.0f};
  const std::vector<float> bias{0.0f, 0.0f, 0.9f, 0.9f, 0.0f};
  const Out o = route(logits, bias, 2, true, 2.5f);
  CHECK_EQ(o.ids[0], 2);  // σ(0)+0.9 = 1.4 > σ(-0.5)+0.9 = 1.277 > σ(2) = 0.881
  CHECK_EQ(o.ids[1], 3);
  const float s2 = sig(0.0f), s3 = sig(-0.5f);
  CHECK_NEAR(o.w[0], s2 / (s2 + s3) * 2.5f, 1e-6f);
  CHECK_NEAR(o.w[1], s3 / (s2 + s3) * 2.5f, 1e-6f);
}

TEST(without_norm_the_weights_are_the_scores_times_scale) {
  const Out o = route({0.3f, -1.0f, 1.5f}, {}, 2, false, 1.5f);
  CHECK_EQ(o.ids[0], 2);
  CHECK_EQ(o.ids[1], 0);
  CHECK_NEAR(o.w[0], sig(1.5f) * 1.5f, 1e-6f);
  CHECK_NEAR(o.w[1], sig(0.3f) * 1.5f, 1e-6f);
}

TEST(negative_selection_scores_rank_as_they_are_without_a_map) {
  // Every selection score negative: plain top-K keeps their order (transformers' topk).
  const Out o = route({0.0f, 1.0f, -1.0f, 2.0f}, {-2.0f, -2.0f, -2.0f, -2.0f}, 2, true, 1.0f);
  CHECK_EQ(o.ids[0], 3);
  CHECK_EQ(o.ids[1], 1);
}

TEST(resident_bonus_applies_to_shifted_selection_scores) {
  // sel = σ(l) + b = {0.5-0.6, 0.731-0.6, 0.269-0.6}; min = -0.331 -> shifted {0.231, 0.462, 0}.
  // With a bonus of 3 for the resident expert 0 at rank 1 (protect 0 -> bonus from rank 1):
  // rank 0 picks 1 (no bonus at rank 0), rank 1 compares 0.231·3 = 0.693 against 0 -> expert 0.
  const std::vector<float> logits{0.0f, 1.0f, -1.0f};
  const std::vector<float> bias{-0.6f, -0.6f, -0.6f};
  const uint8_t resident[3] = {1, 0, 0};
  MoceParams p;
  p.resident_bonus = 3.0f;
  const Out o = route(logits, bias, 2, true, 1.0f, resident, p);
  CHECK_EQ(o.ids[0], 1);
  CHECK_EQ(o.ids[1], 0);
  // Bonus on expert 2 (the lowest selection score, shifted to 0): a multiplier cannot lift it.
  const uint8_t resident2[3] = {0, 0, 1};
  const Out o2 = route(logits, bias, 2, true, 1.0f, resident2, p);
  CHECK_EQ(o2.ids[0], 1);
  CHECK_EQ(o2.ids[1], 0);
  // The weights stay the unbiased scores renormalised.
  CHECK_NEAR(o.w[0], sig(1.0f) / (sig(1.0f) + sig(0.0f)), 1e-6f);
}

TEST(logits_become_the_sigmoid_scores_and_nan_is_refused) {
  std::vector<float> logits{0.0f, 1.0f};
  std::vector<float> sel(2);
  int32_t ids[1];
  float w[1];
  SigmoidRouting sr;
  sigmoid_route_row(logits.data(), sel.data(), 2, 1, sr, nullptr, MoceParams{}, false, ids, w);
  CHECK_NEAR(logits[0], 0.5f, 1e-7f);
  CHECK_NEAR(logits[1], sig(1.0f), 1e-7f);
  std::vector<float> bad{std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()};
  CHECK_THROWS(sigmoid_route_row(bad.data(), sel.data(), 2, 1, sr, nullptr, MoceParams{}, false, ids, w));
  CHECK_THROWS(sigmoid_route_row(logits.data(), sel.data(), 2, 3, sr, nullptr, MoceParams{}, false, ids, w));
}
