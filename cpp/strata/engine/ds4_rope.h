#pragma once
// deepseek4's RoPE (docs/models.md, deepseek4): the LAST rope_dim dims of a vector rotate in
// interleaved (GPT-J) pairs (x[2i], x[2i+1]) by p·θ_i; θ from the layer type's base, with YaRN
// interpolation (transformers' _compute_yarn_parameters, truncate = true, attention factor 1) when
// the compressed layers are configured with it. The attention output's rope slice takes the
// inverse rotation (K = V carried the rotation into the values).
#include <cstdint>
#include <vector>

#include "strata/model/ds4_hparams.h"

namespace strata::engine {

class Ds4Rope {
 public:
  Ds4Rope() = default;
  // yarn: nullptr or !yarn->on = plain base^(-2i/r).
  Ds4Rope(int rope_dim, float base, const model::YarnParams* yarn);
  int dim() const { return dim_; }
  // cos of p·θ_i in cs[0..dim/2), sin in cs[dim/2..dim).
  void angles(int64_t pos, float* cs) const;
  // Rotates the last dim() values of x[0..n) in place; inverse = rotate by -p·θ.
  void apply(float* x, int64_t n, const float* cs, bool inverse = false) const;
  // The same at position pos, the angles computed pair by pair (no scratch).
  void apply_at(float* x, int64_t n, int64_t pos) const;

 private:
  int dim_ = 0;
  std::vector<float> inv_freq_;
};

}  // namespace strata::engine
