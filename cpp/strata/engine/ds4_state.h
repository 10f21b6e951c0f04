#pragma once
// Everything a deepseek4 window needs beyond the common Scratch: the per-position cells
// (ds4_cells.h), the two RoPEs (sliding layers: rope.freq_base; CSA / HCA layers and their
// compressors and indexer: compress_rope_freq_base with YaRN when configured) and the working
// memory of the attention sub-layer, all allocated once when the window is built.
#include <cstdint>
#include <vector>

#include "strata/engine/ds4_cells.h"
#include "strata/engine/ds4_rope.h"
#include "strata/model/model.h"
#include "strata/util/aligned.h"

namespace strata::engine {

struct Ds4Scratch {
  Ds4Scratch(const model::HParams& hp, int max_rows, int64_t max_ctx, int n_slots);

  ScratchBuffer<float> qa;            // [R][q_lora] the normed low-rank query (the indexer reads it too)
  ScratchBuffer<float> iq;            // [R][Hi·Di] indexer queries
  ScratchBuffer<float> iw;            // [R][Hi] indexer head weights
  ScratchBuffer<float> cs;            // [R][rope_dim] each row's RoPE angles
  int64_t pick_stride = 1;            // min(top_k, entries max_ctx holds): a hostile top_k allocates nothing
  ScratchBuffer<int32_t> picks;       // [R][pick_stride] compressed entries a CSA row attends to
  ScratchBuffer<int32_t> n_picks;     // [R]
  ScratchBuffer<float> group_in;      // [R][Hq·Dh / G] one head group's outputs
  ScratchBuffer<float> group_out;     // [R][o_lora]
  ScratchBuffer<float> oa;            // [R][G·o_lora]
  int64_t slot_len = 0;               // floats per slot: min(window, max_ctx) + all entries
  ScratchBuffer<float> slot_scores;   // [slots][slot_len]
  ScratchBuffer<int32_t> slot_order;  // [slots][slot_len]
};

struct Ds4State {
  Ds4State(const model::Model& m, int64_t max_ctx, int max_rows, int n_slots);
  // The cells of these layers only (the MTP drafter's one sliding-window block).
  Ds4State(const model::HParams& hp, const std::vector<model::Ds4AttentionWeights>& layers, int64_t max_ctx,
           int max_rows, int n_slots);
  Ds4Cells cells;
  Ds4Rope rope_main, rope_compress;
  Ds4Scratch s;
};

}  // namespace strata::engine
