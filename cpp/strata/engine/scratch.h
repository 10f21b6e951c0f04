#pragma once
// Working memory of one forward pass over up to max_rows rows, allocated once (at window creation)
// and reused by every run: nothing on the per-token path allocates. One Scratch may serve the main
// window and the MTP block (they never run at the same time).
#include <cstdint>
#include <vector>

#include "strata/engine/multi_linear.h"

#include "strata/model/hparams.h"
#include "strata/util/aligned.h"

namespace strata::engine {

struct ScratchShape {
  int max_rows = 1;      // rows per run
  int64_t max_ctx = 1;   // cells
  int64_t max_list = 1;  // longest attended cell list of any row
  int n_slots = 1;       // concurrent workers (ThreadPool::size())
};

struct Scratch {
  Scratch(const model::HParams& hp, const ScratchShape& shape);
  std::size_t bytes() const;
  // Sum of the capacities (elements) of every buffer: tests assert it never changes after creation.
  std::size_t capacity_signature() const;

  ScratchShape shape;
  // Hyper-connections.
  AlignedBuffer<float> flat;       // [R][n·d] rms(concat streams)
  AlignedBuffer<float> mix;        // [R][(2+n)·n]
  AlignedBuffer<float> pre;        // [R][n]
  AlignedBuffer<float> post;       // [R][n]
  AlignedBuffer<float> comb;       // [R][n·n]
  AlignedBuffer<float> collapsed;  // [R][d]
  AlignedBuffer<float> xn;         // [R][d] normed sub-layer input
  // Attention.
  AlignedBuffer<float> q;          // [R][q_rows] projection output
  AlignedBuffer<float> k;          // [R][Hkv·Dh]
  AlignedBuffer<float> v;          // [R][Hkv·Dh]
  AlignedBuffer<float> qh;         // [R][Hq·Dh] normed, rotated queries
  AlignedBuffer<float> att;        // [R][Hq·Dh] head outputs
  AlignedBuffer<float> rope_cs;    // [R][rope_dim]
  AlignedBuffer<float> iq;         // [R][Hi·Di]
  AlignedBuffer<float> iw;         // [R][Hi]
  AlignedBuffer<float> ik;         // [R][Di]
  AlignedBuffer<int32_t> cells;    // [R][max_list]
  AlignedBuffer<int64_t> n_cells;  // [R]
  int head_group = 1;              // G: query heads attended together (attend_group)
  static constexpr int kMaxRowsPerPass = 4;
  int rows_per_pass = 1;              // T: rows whose G heads attend together (attend_rows; G·T <= 16, T <= 4)
  AlignedBuffer<float> slot_scores;   // [slots][T·G][max(max_ctx, max_list)]
  AlignedBuffer<int32_t> slot_order;  // [slots][max_ctx]
  AlignedBuffer<float> slot_chunk;    // [slots][G][Dh]
  AlignedBuffer<float> out;           // [R][d] sub-layer output
  AlignedBuffer<float> one;           // [R] = 1 (expand weights)
  // MoE.
  AlignedBuffer<float> probs;            // [R][E]
  AlignedBuffer<float> sel;              // [R][E] sigmoid routing's selection scores (routing/glm_scoring.h)
  AlignedBuffer<int32_t> ids;            // [R][K]
  AlignedBuffer<float> weights;          // [R][K]
  AlignedBuffer<int32_t> expert_count;   // [E]
  AlignedBuffer<int32_t> expert_offset;  // [E+1]
  AlignedBuffer<int32_t> expert_order;   // [E] experts in compute order (experts::LayerPass)
  AlignedBuffer<uint8_t> window_map;     // [E] a verification window's requested experts (window routing)
  AlignedBuffer<float> next_probs;       // [R][E] the next MoE layer's router logits (expert prefetch)
  AlignedBuffer<uint8_t> next_want;      // [E] the next MoE layer's predicted experts
  AlignedBuffer<int32_t> entries;        // [R·K] entry ids (row·K + slot) sorted by expert
  AlignedBuffer<int32_t> entry_rows;     // [R·K] the row of each sorted entry
  AlignedBuffer<float> ge;               // [R·K][F] gate outputs per entry, then silu(gate)·up
  AlignedBuffer<float> ue;               // [R·K][F]
  AlignedBuffer<float> routed;           // [R][K][d]
  AlignedBuffer<float> sg;               // [R][max(Fs, Fd)] shared expert or dense FFN (glm4moe) gate
  AlignedBuffer<float> su;               // [R][max(Fs, Fd)]
  AlignedBuffer<float> shared;           // [R][d]
  AlignedBuffer<float> shared_gate;      // [R]
  // Heads.
  AlignedBuffer<float> h;  // [R][d] collapsed, normed head input
  // Prepared activations and the task list of the fused linear dispatches (multi_linear.h).
  AlignedBuffer<uint8_t> act_x;   // xn in up to three activation forms
  AlignedBuffer<uint8_t> act_h;   // [R·K] expert hidden rows in the down weights' form
  AlignedBuffer<uint8_t> act_hs;  // [R] shared-expert hidden rows
  PreparedInput prep_x;
  std::vector<LinearTask> tasks;  // capacity fixed at creation (2E + 16)
};

}  // namespace strata::engine
