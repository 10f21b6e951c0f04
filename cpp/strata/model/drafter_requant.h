#pragma once
// SPEC §2.10: low-bit drafter weights. At load, the MTP block's q/o projections
// (attn_q, attn_output), fc_embedding, fc_hidden and shared expert (ffn_gate/up/down_shexp) are
// dequantized to float and requantized into buffers the Model owns (allocated once); the MTP weight
// views then point at them. K/V, the router, the shared-expert gate (ffn_gate_inp_shexp), norms and
// hyper-connection parameters are left untouched (same pointers, same bytes).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "strata/model/weights.h"
#include "strata/quant/quantize.h"

namespace strata {
class ThreadPool;
}

namespace strata::model {

class Model;

// Q4 = Q4_0 with the Lloyd fit, Q5 = Q5_0 (ggml rule): R-11, every tensor of the set. Q4Ggml = Q4_0 by
// ggml's rule, only the tensors stored wider than Q4_0 whose columns are a multiple of 32 (the others
// keep their bytes, never an error): the default drafter format (STRATA_METAL_MTP_DRAFT_Q4), ~5 ms at
// load where the Lloyd fit takes ~300 ms on the demo model, for the same acceptance.
enum class DrafterRequant { Off, Q4, Q5, Q4Ggml };

// "off" / "q4" / "q5" / "q4-ggml".
const char* drafter_requant_name(DrafterRequant r);

struct DrafterRequantReport {
  int tensors = 0;               // weights requantized
  std::size_t bytes_before = 0;  // of those weights
  std::size_t bytes_after = 0;
};

// Whether Q4Ggml requantizes a matrix of this type and width: Q4_0 would save bytes and the columns
// are whole 32-value blocks. engine/mtp.cpp applies the same rule to the drafter's gathered head.
bool q4_saves_bytes(quant::GGMLType type, int64_t cols);

// dst (w.rows · row_bytes(type, w.cols) bytes) = w's rows decoded and quantized to `type` by `method`,
// slab_bytes of floats at a time (every block is quantized on its own, so the bytes do not depend on it).
// Rows are spread over pool (nullptr: this thread).
void requantize_rows(const Weight& w, quant::GGMLType type, quant::QuantMethod method, uint8_t* dst, ThreadPool* pool,
                     std::size_t slab_bytes = std::size_t{16} << 20);

// Requantizes the drafter weights of `m` in place (no-op for Off or a model without MTP). Every
// requantized weight must have a column count that is a multiple of 32 (else Error(Value) naming
// the tensor). Rows are spread over pool (nullptr: this thread). The float copy of a tensor is made
// slab_bytes at a time (rows in slabs; the bytes do not depend on it).
DrafterRequantReport requant_drafter(Model& m, DrafterRequant r, ThreadPool* pool,
                                     std::size_t slab_bytes = std::size_t{16} << 20);

}  // namespace strata::model
