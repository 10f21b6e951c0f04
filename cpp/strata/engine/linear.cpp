#include "strata/engine/linear.h"

#include "strata/quant/dequantize.h"

namespace strata::engine {

void dequantize_weight_row(const model::Weight& w, int64_t row, float* out) {
  quant::dequantize_row(w.type, w.row(row), out, w.cols);
}

}  // namespace strata::engine
