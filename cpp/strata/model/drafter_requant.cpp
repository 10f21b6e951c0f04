#include "strata/model/drafter_requant.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "strata/model/model.h"
#include "strata/quant/dequantize.h"
#include "strata/quant/quantize.h"
#include "strata/quant/types.h"
#include "strata/util/aligned.h"
#include "strata/util/error.h"

namespace strata::model {

const char* drafter_requant_name(DrafterRequant r) {
  switch (r) {
    case DrafterRequant::Q4: return "q4";
    case DrafterRequant::Q5: return "q5";
    case DrafterRequant::Q4Ggml: return "q4-ggml";
    default: return "off";
  }
}

bool q4_saves_bytes(quant::GGMLType type, int64_t cols) {
  return cols % 32 == 0 && quant::row_bytes(type, cols) > quant::row_bytes(quant::GGMLType::Q4_0, cols);
}

void requantize_rows(const Weight& w, quant::GGMLType type, quant::QuantMethod method, uint8_t* dst, ThreadPool* pool,
                     std::size_t slab_bytes) {
  const std::size_t cols = static_cast<std::size_t>(w.cols);
  const std::size_t rb = quant::row_bytes(type, w.cols);
  // The float copy stays ~slab_bytes however large the drafter, instead of 4 bytes per weight at load.
  const int64_t slab = std::max<int64_t>(1, static_cast<int64_t>(slab_bytes / (4 * cols)));
  std::vector<float> f(static_cast<std::size_t>(std::min<int64_t>(slab, w.rows)) * cols);
  for (int64_t r0 = 0; r0 < w.rows; r0 += slab) {
    const int64_t n = std::min(slab, w.rows - r0);
    for (int64_t r = 0; r < n; ++r)
      quant::dequantize_row(w.type, w.row(r0 + r), f.data() + static_cast<std::size_t>(r) * cols, w.cols);
    quant::quantize_matrix(type, f.data(), n, w.cols, dst + static_cast<std::size_t>(r0) * rb, method, pool);
  }
}

namespace {

// Requantizes w into a new owned buffer and repoints w at it.
void requant_weight(Model& m, Weight& w, const char* name, quant::GGMLType type, quant::QuantMethod method,
                    ThreadPool* pool, DrafterRequantReport& rep, bool only_wider, std::size_t slab_bytes) {
  if (!w.present()) return;
  if (only_wider && !q4_saves_bytes(w.type, w.cols)) return;
  if (w.cols % 32 != 0)
    throw_error(ErrorKind::Value, std::string("drafter requant: tensor ") + name + " has " + std::to_string(w.cols) +
                                      " columns, not a multiple of 32");
  const std::size_t rows = static_cast<std::size_t>(w.rows);
  const std::size_t rb = quant::row_bytes(type, w.cols);
  AlignedBuffer<uint8_t> buf(rows * rb);
  requantize_rows(w, type, method, buf.data(), pool, slab_bytes);
  rep.tensors += 1;
  rep.bytes_before += rows * w.row_stride;
  rep.bytes_after += rows * rb;
  w = Weight{type, buf.data(), w.rows, w.cols, rb};
  m.owned_weights.push_back(std::move(buf));
}

}  // namespace

DrafterRequantReport requant_drafter(Model& m, DrafterRequant r, ThreadPool* pool, std::size_t slab_bytes) {
  DrafterRequantReport rep;
  if (r == DrafterRequant::Off || !m.mtp) return rep;
  const quant::GGMLType type = r == DrafterRequant::Q5 ? quant::GGMLType::Q5_0 : quant::GGMLType::Q4_0;
  const quant::QuantMethod method = r == DrafterRequant::Q4 ? quant::QuantMethod::Lloyd : quant::QuantMethod::Ggml;
  const bool only_wider = r == DrafterRequant::Q4Ggml;
  MtpWeights& w = *m.mtp;
  requant_weight(m, w.block.attn.q, "attn_q", type, method, pool, rep, only_wider, slab_bytes);
  requant_weight(m, w.block.attn.o, "attn_output", type, method, pool, rep, only_wider, slab_bytes);
  requant_weight(m, w.fc_embedding, "fc_embedding", type, method, pool, rep, only_wider, slab_bytes);
  requant_weight(m, w.fc_hidden, "fc_hidden", type, method, pool, rep, only_wider, slab_bytes);
  requant_weight(m, w.block.moe.sh_gate, "ffn_gate_shexp", type, method, pool, rep, only_wider, slab_bytes);
  requant_weight(m, w.block.moe.sh_up, "ffn_up_shexp", type, method, pool, rep, only_wider, slab_bytes);
  requant_weight(m, w.block.moe.sh_down, "ffn_down_shexp", type, method, pool, rep, only_wider, slab_bytes);
  return rep;
}

}  // namespace strata::model
