#pragma once
// llama.cpp's nextn eh_proj [d, 2d] multiplies concat(enorm(e), hnorm(h)); the engine keeps its
// column halves as two contiguous [d, d] matrices (its GEMV reads whole rows).
#include <cstdint>
#include <string>

#include "strata/model/model.h"

namespace strata::model {

// Columns [half·cols/2, (half+1)·cols/2) of w as a matrix owned by m (m.owned_weights). A row that
// cannot be split at a quantisation block boundary is a Format error naming `name` and the file.
Weight column_half(Model& m, const Weight& w, int64_t half, const std::string& name, const std::string& origin);

}  // namespace strata::model
