// The IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S codebooks and the IQ sign table, as data copied from
// ggml (ggml/src/ggml-common.h: iq2xxs_grid, iq2xs_grid, iq2s_grid, iq3xxs_grid, iq3s_grid,
// ksigns_iq2xs; MIT licence, ggml authors), the grids written out from gguf-py's packed copies
// (gguf.quants, grid_hex). The entries live in iq_tables/*.inc, which the Metal kernels
// (metal/kernels/quant_formats.h) include too, so the two backends read one copy.
// Files quantized by llama.cpp index these exact tables, so they must not be edited.
#include "strata/quant/iq_grids.h"

namespace strata::quant {

// 256 entries of 8 magnitudes, one byte each (0x08, 0x19 or 0x2b), element 0 in the low byte.
alignas(64) const uint64_t kIQ2XXSGrid[256] = {
#include "strata/quant/iq_tables/iq2xxs_grid.inc"
};

// 512 entries of 8 magnitudes, one byte each (0x08, 0x19 or 0x2b), element 0 in the low byte.
alignas(64) const uint64_t kIQ2XSGrid[512] = {
#include "strata/quant/iq_tables/iq2xs_grid.inc"
};

// 1024 entries of 8 magnitudes, one byte each (0x08, 0x19 or 0x2b), element 0 in the low byte.
alignas(64) const uint64_t kIQ2SGrid[1024] = {
#include "strata/quant/iq_tables/iq2s_grid.inc"
};

// 256 entries of 4 magnitudes, one byte each (0x04 .. 0x3e), element 0 in the low byte.
alignas(64) const uint32_t kIQ3XXSGrid[256] = {
#include "strata/quant/iq_tables/iq3xxs_grid.inc"
};

// 512 entries of 4 magnitudes, one byte each (odd, 0x01 .. 0x0f), element 0 in the low byte.
alignas(64) const uint32_t kIQ3SGrid[512] = {
#include "strata/quant/iq_tables/iq3s_grid.inc"
};

// 7 stored sign bits -> 8 sign bits (bit 7 makes the count of set bits even); bit j set means
// element j is negated.
alignas(64) const uint8_t kIQSigns[128] = {
#include "strata/quant/iq_tables/ksigns_iq2xs.inc"
};

}  // namespace strata::quant
