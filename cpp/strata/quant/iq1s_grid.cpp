// The IQ1_S / IQ1_M codebook, as data copied from ggml (ggml/src/ggml-common.h: iq1s_grid; MIT licence,
// ggml authors), written out from gguf-py's packed copy (gguf.quants.IQ1_S, grid_hex). The entries live
// in iq_tables/iq1s_grid.inc, which the Metal kernels (metal/kernels/quant_formats.h) include too, so
// the two backends read one copy.
// Files quantized by llama.cpp index this exact table, so it must not be edited.
#include "strata/quant/iq_grids.h"

namespace strata::quant {

// 2048 entries of 8 signed bytes (-1 = 0xff, 0, +1), element 0 in the low byte.
alignas(64) const uint64_t kIQ1SGrid[2048] = {
#include "strata/quant/iq_tables/iq1s_grid.inc"
};

}  // namespace strata::quant
