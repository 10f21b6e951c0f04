#include "strata/engine/linear.h"

// TODO(merge quant): include "strata/quant/dequantize.h" once it lands; declared here meanwhile.
namespace strata::quant {
void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n);
}

namespace strata::engine {

void dequantize_weight_row(const model::Weight& w, int64_t row, float* out) {
  quant::dequantize_row(w.type, w.row(row), out, w.cols);
}

}  // namespace strata::engine
