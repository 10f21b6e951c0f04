#include "strata/engine/ds4_compressor.h"

#include <cmath>

#include "strata/engine/ops.h"

namespace strata::engine {

void ds4_compress_entry(const model::Ds4CompressorWeights& w, const float* kv, const float* gate, int64_t entry,
                        float eps, const Ds4Rope& rope, float* out) {
  const int64_t dim = w.dim, width = int64_t{w.coff} * dim, r = w.ratio;
  const bool overlap = w.coff == 2;
  const int64_t prev = overlap && entry > 0 ? (entry - 1) * r : -1;  // window w−1's first position (Ca)
  const int64_t cur = entry * r;
  const int64_t cur_off = overlap ? dim : 0;  // Cb: the second half of the projections
  for (int64_t c = 0; c < dim; ++c) {
    float m = -INFINITY;
    if (prev >= 0)
      for (int64_t j = 0; j < r; ++j) m = std::fmax(m, gate[(prev + j) * width + c] + w.ape[j * width + c]);
    for (int64_t j = 0; j < r; ++j)
      m = std::fmax(m, gate[(cur + j) * width + cur_off + c] + w.ape[j * width + cur_off + c]);
    float sum = 0.0f, acc = 0.0f;
    if (prev >= 0)
      for (int64_t j = 0; j < r; ++j) {
        const float e = std::exp(gate[(prev + j) * width + c] + w.ape[j * width + c] - m);
        sum += e;
        acc += e * kv[(prev + j) * width + c];
      }
    for (int64_t j = 0; j < r; ++j) {
      const float e = std::exp(gate[(cur + j) * width + cur_off + c] + w.ape[j * width + cur_off + c] - m);
      sum += e;
      acc += e * kv[(cur + j) * width + cur_off + c];
    }
    out[c] = acc / sum;
  }
  rms_norm(out, dim, eps, w.norm, out);
  rope.apply_at(out, dim, cur);
}

}  // namespace strata::engine
