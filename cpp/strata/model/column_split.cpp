#include "strata/model/column_split.h"

#include <cstring>

#include "strata/quant/types.h"
#include "strata/util/error.h"

namespace strata::model {

Weight column_half(Model& m, const Weight& w, int64_t half, const std::string& name, const std::string& origin) {
  const int64_t d = w.cols / 2;
  const std::size_t rb = quant::row_bytes(w.type, d);
  if (quant::row_bytes(w.type, w.cols) != 2 * rb || w.row_stride != 2 * rb)
    throw_file_error(
        ErrorKind::Format, origin,
        "tensor " + name + ": its row of " + std::to_string(w.cols) + " cannot be split in two at a block boundary");
  AlignedBuffer<uint8_t> buf(static_cast<std::size_t>(w.rows) * rb);
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(buf.data() + static_cast<std::size_t>(r) * rb, w.row(r) + static_cast<std::size_t>(half) * rb, rb);
  const Weight out{w.type, buf.data(), w.rows, d, rb};
  m.owned_weights.push_back(std::move(buf));
  return out;
}

}  // namespace strata::model
