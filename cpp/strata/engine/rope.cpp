#include "strata/engine/rope.h"

#include <cmath>

namespace strata::engine {

Rope::Rope(int rope_dim, float freq_base) : dim_(rope_dim), inv_freq_(static_cast<size_t>(rope_dim / 2)) {
  // As transformers builds it: 1 / base^(2i/r) in float32.
  for (int i = 0; i < rope_dim / 2; ++i)
    inv_freq_[static_cast<size_t>(i)] =
        1.0f / std::pow(freq_base, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
}

void Rope::angles(int64_t pos, float* cs) const {
  const int half = dim_ / 2;
  const float p = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float a = p * inv_freq_[static_cast<size_t>(i)];
    cs[i] = static_cast<float>(std::cos(static_cast<double>(a)));
    cs[half + i] = static_cast<float>(std::sin(static_cast<double>(a)));
  }
}

void Rope::apply(float* x, const float* cs) const {
  const int half = dim_ / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cs[i], s = cs[half + i];
    const float a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

}  // namespace strata::engine
