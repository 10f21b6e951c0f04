#pragma once
// deepseek4's compressors (docs/models.md, deepseek4): compressed entry w of a CSA / HCA layer (or
// of a CSA layer's indexer) from the per-position projections kept in the cells. Per channel c, a
// softmax over the window's slots of gate + ape weights the slots' kv values:
//   HCA (ratio 128, coff 1): the slots are positions w·128 .. w·128 + 127;
//   CSA (ratio 4, coff 2): channel c of window w−1's positions (first half of the projections,
//   Ca) and channel Dh + c of window w's (second half, Cb): 8 slots, 4 when w = 0.
// The pooled vector is RMSNorm-ed (compressor norm) and rotated at position w·ratio.
#include <cstdint>

#include "strata/engine/ds4_rope.h"
#include "strata/model/ds4_weights.h"

namespace strata::engine {

// kv, gate: the projections of position 0 (position p at + p·coff·dim). out: [dim].
void ds4_compress_entry(const model::Ds4CompressorWeights& w, const float* kv, const float* gate, int64_t entry,
                        float eps, const Ds4Rope& rope, float* out);

}  // namespace strata::engine
