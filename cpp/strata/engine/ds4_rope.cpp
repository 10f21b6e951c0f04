#include "strata/engine/ds4_rope.h"

#include <algorithm>
#include <cmath>

namespace strata::engine {
namespace {

// The dimension at which the wavelength makes `rotations` turns over the original context.
double correction_dim(double rotations, int dim, double base, double context) {
  return (dim * std::log(context / (rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
}

}  // namespace

Ds4Rope::Ds4Rope(int rope_dim, float base, const model::YarnParams* yarn)
    : dim_(rope_dim), inv_freq_(static_cast<std::size_t>(rope_dim / 2)) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    // As transformers builds it in float32: base^(2i/r), then its inverse.
    const float pos_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
    inv_freq_[static_cast<std::size_t>(i)] = 1.0f / pos_freq;
  }
  if (!yarn || !yarn->on) return;
  double low = std::floor(correction_dim(yarn->beta_fast, rope_dim, base, yarn->original_context));
  double high = std::ceil(correction_dim(yarn->beta_slow, rope_dim, base, yarn->original_context));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rope_dim - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const float pos_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (yarn->factor * pos_freq);
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // the share of the extrapolated (unscaled) frequency
    inv_freq_[static_cast<std::size_t>(i)] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
}

void Ds4Rope::angles(int64_t pos, float* cs) const {
  const int half = dim_ / 2;
  const float p = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float a = p * inv_freq_[static_cast<std::size_t>(i)];
    cs[i] = std::cos(a);
    cs[half + i] = std::sin(a);
  }
}

void Ds4Rope::apply(float* x, int64_t n, const float* cs, bool inverse) const {
  const int half = dim_ / 2;
  float* r = x + n - dim_;
  const float sign = inverse ? -1.0f : 1.0f;
  for (int i = 0; i < half; ++i) {
    const float c = cs[i], s = sign * cs[half + i];
    const float a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

void Ds4Rope::apply_at(float* x, int64_t n, int64_t pos) const {
  const int half = dim_ / 2;
  float* r = x + n - dim_;
  const float p = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float a = p * inv_freq_[static_cast<std::size_t>(i)];
    const float c = std::cos(a), s = std::sin(a);
    const float x0 = r[2 * i], x1 = r[2 * i + 1];
    r[2 * i] = x0 * c - x1 * s;
    r[2 * i + 1] = x1 * c + x0 * s;
  }
}

}  // namespace strata::engine
