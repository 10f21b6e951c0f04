#pragma once
// NEOX (half-split) rotary position embedding over the first rope_dim dims of a head
// (docs/gguf.md §2): for i < r/2, θ_i = base^(-2i/r), the pair (x_i, x_{i+r/2}) is rotated by p·θ_i.
#include <cstdint>
#include <vector>

namespace strata::engine {

class Rope {
 public:
  Rope() = default;
  Rope(int rope_dim, float freq_base);
  int dim() const { return dim_; }
  // cos/sin of p·θ_i for i < dim/2, written to cs[0..dim/2) (cos) and cs[dim/2..dim) (sin).
  void angles(int64_t pos, float* cs) const;
  // Rotates x (one head, at least dim values) in place with angles from angles().
  void apply(float* x, const float* cs) const;

 private:
  int dim_ = 0;
  std::vector<float> inv_freq_;
};

}  // namespace strata::engine
