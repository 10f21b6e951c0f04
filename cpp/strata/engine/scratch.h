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
  ScratchBuffer<float> flat;       // [R][n·d] rms(concat streams)
  ScratchBuffer<float> mix;        // [R][(2+n)·n]
  ScratchBuffer<float> pre;        // [R][n]
  ScratchBuffer<float> post;       // [R][n]
  ScratchBuffer<float> comb;       // [R][n·n]
  ScratchBuffer<float> collapsed;  // [R][d]
  ScratchBuffer<float> xn;         // [R][d] normed sub-layer input
  // Attention.
  ScratchBuffer<float> q;        // [R][q_rows] projection output
  ScratchBuffer<float> k;        // [R][Hkv·Dh]
  ScratchBuffer<float> v;        // [R][Hkv·Dh]
  ScratchBuffer<float> qh;       // [R][Hq·Dh] normed, rotated queries
  ScratchBuffer<float> att;      // [R][Hq·Dh] head outputs
  ScratchBuffer<float> rope_cs;  // [R][rope_dim]
  // Row r's angles in rope_cs are those of position rope_pos[r] under rope_of (-1 / nullptr: none):
  // every layer of a step rotates at the same positions, so the first layer computes them.
  ScratchBuffer<int64_t> rope_pos;  // [R]
  const void* rope_of = nullptr;
  ScratchBuffer<float> iq;         // [R][Hi·Di]
  ScratchBuffer<float> iw;         // [R][Hi]
  ScratchBuffer<float> ik;         // [R][Di]
  ScratchBuffer<int32_t> cells;    // [R][max_list]
  ScratchBuffer<int64_t> n_cells;  // [R]
  int head_group = 1;              // G: query heads attended together (attend_group)
  static constexpr int kMaxRowsPerPass = 4;
  int rows_per_pass = 1;              // T: rows whose G heads attend together (attend_rows; G·T <= 16, T <= 4)
  ScratchBuffer<float> slot_scores;   // [slots][T·G][max(max_ctx, max_list)]
  ScratchBuffer<int32_t> slot_order;  // [slots][max_ctx]
  ScratchBuffer<float> slot_chunk;    // [slots][G][Dh]
  ScratchBuffer<float> out;           // [R][d] sub-layer output
  ScratchBuffer<float> one;           // [R] = 1 (expand weights)
  // MoE.
  ScratchBuffer<float> probs;            // [R][E]
  ScratchBuffer<float> sel;              // [R][E] sigmoid routing's selection scores (routing/glm_scoring.h)
  ScratchBuffer<int32_t> ids;            // [R][K]
  ScratchBuffer<float> weights;          // [R][K]
  ScratchBuffer<int32_t> expert_count;   // [E]
  ScratchBuffer<int32_t> expert_offset;  // [E+1]
  ScratchBuffer<int32_t> expert_order;   // [E] experts in compute order (experts::LayerPass)
  ScratchBuffer<uint8_t> window_map;     // [E] a verification window's requested experts (window routing, cuts,
                                         // the target rows' experts for the store's retention)
  ScratchBuffer<float> next_probs;       // [R][E] the next MoE layer's router logits (expert prefetch)
  ScratchBuffer<uint8_t> next_want;      // [E] the next MoE layer's predicted experts
  ScratchBuffer<int32_t> entries;        // [R·K] entry ids (row·K + slot) sorted by expert
  ScratchBuffer<int32_t> entry_rows;     // [R·K] the row of each sorted entry
  ScratchBuffer<float> ge;               // [R·K][F] gate outputs per entry, then silu(gate)·up
  ScratchBuffer<float> ue;               // [R·K][F]
  ScratchBuffer<float> routed;           // [R][K][d]
  ScratchBuffer<float> sg;               // [R][max(Fs, Fd)] shared expert or dense FFN (glm4moe) gate
  ScratchBuffer<float> su;               // [R][max(Fs, Fd)]
  ScratchBuffer<float> shared;           // [R][d]
  ScratchBuffer<float> shared_gate;      // [R]
  // Heads.
  ScratchBuffer<float> h;  // [R][d] collapsed, normed head input
  // Prepared activations and the task list of the fused linear dispatches (multi_linear.h).
  ScratchBuffer<uint8_t> act_x;   // xn in up to three activation forms
  ScratchBuffer<uint8_t> act_h;   // [R·K] expert hidden rows in the down weights' form
  ScratchBuffer<uint8_t> act_hs;  // [R] shared-expert hidden rows
  PreparedInput prep_x;
  std::vector<LinearTask> tasks;  // capacity fixed at creation (2E + 16)
};

}  // namespace strata::engine
