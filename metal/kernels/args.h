#pragma once
// Argument blocks of the kernels ([[buffer(0)]], set with set_bytes): plain structs of 32-bit fields,
// laid out the same by the Metal compiler and by C++, shared by the kernel bodies and the host's
// dispatch plan (metal/host/dispatch.*). No MSL keywords here.
#if defined(__METAL_VERSION__)
#include <metal_stdlib>  // uint32_t and friends
#else
#include <cstdint>
#endif

// ---- routing (router.h, plan.h)

struct RouteArgs {
  uint32_t n_rows;
  uint32_t n_experts;    // E <= kRouteMaxExperts
  uint32_t k;            // 1 <= k <= min(E, 64)
  uint32_t row_stride;   // floats between rows of the input
  float resident_bonus;  // MoceParams (routing/router.h)
  float rank1_scale;
  int32_t protect;
  uint32_t draft;
  int32_t draft_from_row;    // rows >= this are draft rows of a verification window; -1: none
  uint32_t has_resident;     // 0: no residency map (plain top-K)
  uint32_t resident_stride;  // bytes between rows' residency maps (0: one map for every row)
  uint32_t softmax;          // 1: the input is router logits, softmax them first
};

struct PlanArgs {
  uint32_t n_entries;  // rows * k (<= 65535)
  uint32_t k;
  uint32_t n_experts;
  uint32_t has_resident;
};

// Written by the plan kernel beside the arrays.
struct PlanHeader {
  uint32_t n_groups;
  uint32_t n_resident_groups;
  uint32_t n_resident_slots;
  int32_t bad_entry;  // -1, or the first entry whose id is outside [0, E)
};

// ---- hyper-connection combine and norms (combine.h, norm.h)

struct CombineArgs {
  uint32_t d;
  uint32_t n;  // streams
  uint32_t n_tok;
  uint32_t k;           // routed outputs per token
  uint32_t has_shared;  // shared expert applied
};

struct RmsArgs {
  uint32_t n;  // elements per row
  uint32_t n_rows;
  uint32_t in_stride;   // floats between input rows
  uint32_t out_stride;  // floats between output rows
  float eps;
  uint32_t has_weight;
};

struct HcArgs {
  uint32_t n;  // streams
  uint32_t d;
  uint32_t n_rows;
  uint32_t sinkhorn_iters;
  float eps;      // hc epsilon
  uint32_t head;  // 1: HyperHead (pre only, n mix values per row)
};

// ---- GEMV (gemv.h)

struct GemvArgs {
  uint32_t rows;       // output rows of W
  uint32_t cols;       // elements per row
  uint32_t row_bytes;  // bytes between rows of W
  uint32_t nx;         // activation rows
  uint32_t x_stride;   // floats between activation rows
  uint32_t y_stride;   // floats between output rows
  // Indirect (MoE) mode: rows of activation/output come through a plan (gemv_moe); unused otherwise.
  uint32_t expert_bytes;  // bytes between experts of a 3-D weight
  uint32_t k;             // entries per token row in the plan
};

// ---- attention (attention.h)

struct QsaPrepArgs {
  uint32_t n_rows;
  uint32_t n_head;     // Hq
  uint32_t n_head_kv;  // Hkv
  uint32_t head_dim;   // Dh
  uint32_t rope_dim;   // rotated dims (even, <= Dh; 0 = no RoPE)
  uint32_t gated;      // q rows hold [query, gate] per head
  uint32_t q_stride;   // floats between rows of the q projection output
  uint32_t kv_stride;  // floats between rows of the k / v projection outputs
  uint32_t cs_stride;  // floats between rows of the cos/sin table (rope_dim: cos then sin)
  float eps;
  uint32_t cell0;      // cell written by row 0 (row r writes cell0 + r)
  uint32_t kv_blocks;  // ceil(Dh / 64)
};

struct AttnArgs {
  uint32_t n_rows;
  uint32_t n_head;         // Hq
  uint32_t n_head_kv;      // Hkv
  uint32_t head_dim;       // Dh
  uint32_t kv_blocks;      // ceil(Dh / 64)
  uint32_t list_stride;    // entries between rows of the cell lists
  uint32_t implicit_list;  // 1: row r attends to cells 0 .. n_cells[r]-1 (no list buffer)
  uint32_t plane_stride;   // rows per plane of the chunk partials (>= n_rows; split path)
  uint32_t n_chunks;       // chunk planes (split path: ceil(max list length / 64))
  uint32_t q_stride;       // floats between rows of the queries ([Hq][Dh] per row)
  uint32_t gate_stride;    // floats between rows of the q projection holding the gates
  uint32_t gated;
  uint32_t out_stride;  // floats between output rows ([Hq·Dh] per row)
  float sqrt_dh;        // scores are (q·k)/sqrt_dh
};

// ---- MoE and element-wise (moe.h)

struct EwArgs {
  uint32_t n;      // elements
  uint32_t op;     // kEw*
  uint32_t inner;  // broadcast ops: the source row length
  uint32_t group;  // broadcast ops: output elements per source row
};

// ---- cell lists and the lightning indexer (cells.h)

struct CellArgs {
  uint32_t n_rows;
  uint32_t pos0;          // position (= cell) of row 0
  uint32_t sink;          // S
  uint32_t window;        // W (> 0: list mode)
  uint32_t top_k;         // T (0: no indexer picks)
  uint32_t list_stride;   // entries between rows of the lists
  uint32_t score_stride;  // floats between rows of the indexer scores
  uint32_t heads;         // Hi
  uint32_t dim;           // Di
  uint32_t q_stride;      // floats between rows of the indexer queries ([Hi][Di])
  uint32_t w_stride;      // floats between rows of the indexer head weights ([Hi])
  uint32_t use_scores;    // 1: pick top_k candidates by score
};
