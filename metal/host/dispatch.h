#pragma once
// The dispatch plan of the Metal backend: for each kernel, the pipeline (and its function
// constants), the argument block, buffer indices and offsets, threadgroup memory, grid and
// threadgroup sizes — written once against the encoder interface (device.h), run by the emulator on
// Linux and by metal-cpp on a Mac. Shape limits are checked here (strata::Error(Value) naming the
// limit), so a kernel never sees a launch it cannot handle.
#include <cstdint>

#include "metal/host/device.h"
#include "metal/host/tiles.h"
#include "metal/kernels/args.h"
#include "strata/quant/types.h"

namespace strata::mtl {

// ---- routing

inline constexpr uint32_t kRouteRowsPerGroup = 4;  // SIMD groups (rows) per threadgroup
inline constexpr uint32_t kRouteMaxExperts = 1024;
inline constexpr uint32_t kRouteMaxK = 64;
// x: [n_rows][row_stride] probabilities (or logits with a.softmax); resident: E bytes per row
// (resident_stride apart) or unbound when !has_resident; ids/weights: [n_rows][k]; status: [n_rows].
void encode_route(Device& dev, const RouteArgs& a, BufferRef x, BufferRef resident, BufferRef ids, BufferRef weights,
                  BufferRef status);

inline constexpr uint32_t kPlanThreads = 256;
inline constexpr uint32_t kPlanMaxEntries = 65535;
// ids: [n_entries]; header: one PlanHeader; group_expert: [min(E, n_entries)]; group_offset: that + 1;
// slot_entry, entry_slot: [n_entries].
void encode_plan(Device& dev, const PlanArgs& a, BufferRef ids, BufferRef resident, BufferRef header,
                 BufferRef group_expert, BufferRef group_offset, BufferRef slot_entry, BufferRef entry_slot);

// ---- residual path

struct CombineBuffers {
  BufferRef routed, weights, shared, shared_gate, post, comb, x_in, x_out;
};
inline bool combine_has_fast_path(uint32_t d, uint32_t n) { return d == 2560 && n == 4; }
// The kernel encode_combine picks for a shape.
const char* combine_kernel(uint32_t d, uint32_t n, bool use_fast = true);
// use_fast: take the fixed-shape kernel when the shape has one (false forces the generic kernel).
void encode_combine(Device& dev, const CombineArgs& a, const CombineBuffers& b, bool use_fast = true);

inline constexpr uint32_t kRmsThreads = 256;
void encode_rms(Device& dev, const RmsArgs& a, BufferRef x, BufferRef w, BufferRef out);

inline constexpr uint32_t kHcThreads = 256;
void encode_hc_collapse(Device& dev, const HcArgs& a, BufferRef mix, BufferRef scale, BufferRef base, BufferRef X,
                        BufferRef post, BufferRef comb, BufferRef out);

// ---- GEMV (gemv.h)

// Function constant indices of the GEMV pipelines.
inline constexpr uint16_t kFcGemvL = 0, kFcGemvR = 1, kFcGemvK = 2;

bool gemv_supported(quant::GGMLType type);
// The kernel name suffix of a type ("q4_k").
const char* gemv_type_suffix(quant::GGMLType type);

// Y[a·y_stride + r] = W[r, :] · X[a·x_stride ...] for r < rows, a < nx.
struct GemvCall {
  quant::GGMLType type = quant::GGMLType::F32;
  BufferRef W;
  uint32_t rows = 0, cols = 0, row_bytes = 0;
  BufferRef X;
  uint32_t nx = 1, x_stride = 0;
  BufferRef Y;
  uint32_t y_stride = 0;
};
void encode_gemv(Device& dev, const GemvCall& c, const GemvTile& tile);

// out[i·out_stride ...] = row ids[i] of W decoded (cols elements).
void encode_get_rows(Device& dev, quant::GGMLType type, BufferRef W, uint32_t cols, uint32_t row_bytes, BufferRef ids,
                     uint32_t n_ids, BufferRef out, uint32_t out_stride);

// MoE expert GEMV through a plan (moe.h): for each plan group (expert), rows of that expert's matrix
// times the activations of the group's slots. x_per_token: activation row = entry / k (else entry).
struct MoeGemvCall {
  quant::GGMLType type = quant::GGMLType::F32;
  BufferRef W;  // [E][rows][row_bytes]
  uint32_t rows = 0, cols = 0, row_bytes = 0, expert_bytes = 0;
  BufferRef X;
  uint32_t x_stride = 0;
  bool x_per_token = true;
  uint32_t k = 1;
  BufferRef Y;  // [entry][y_stride]
  uint32_t y_stride = 0;
  BufferRef header, group_expert, group_offset, slot_entry;  // the plan (encode_plan)
  uint32_t max_groups = 0;                                   // min(E, entries): the grid's group dimension
};
void encode_moe_gemv(Device& dev, const MoeGemvCall& c, const GemvTile& tile);

// Element-wise steps (moe.h): op is one of kEw* (metal/kernels/moe.h).
void encode_elementwise(Device& dev, const EwArgs& a, BufferRef x, BufferRef y, BufferRef out);

// ---- attention (attention.h)

inline constexpr uint16_t kFcKvOnly = 0;  // qsa_prep: write K/V only (catch-up rows)
inline constexpr uint32_t kAttnMaxHeadDim = 256;

// The cell format of a layer's K/V (attention.h): int8 + fp16 scales (strata) or f32 (qwen3moe: the
// k8/v8 buffers hold floats, ks/vs are not read and may be left unbound).
enum class KvFormat { Int8, F32 };

struct QsaBuffers {
  BufferRef q_proj, k_proj, v_proj;  // projection outputs
  BufferRef q_norm, k_norm;          // [Dh] weights
  BufferRef rope_cs;                 // [row][cs_stride]: cos then sin of the row's position (Rope::angles)
  BufferRef qh;                      // [row][Hq][Dh] out
  BufferRef k8, ks, v8, vs;          // the layer's cells
};
void encode_qsa_prep(Device& dev, const QsaPrepArgs& a, const QsaBuffers& b, bool kv_only,
                     KvFormat fmt = KvFormat::Int8);

struct AttnBuffers {
  BufferRef qh, k8, ks, v8, vs;
  BufferRef cells;            // [row][list_stride] cell ids (unused with implicit lists)
  BufferRef n_cells;          // [row] list lengths
  BufferRef gates;            // the q projection output (gated models)
  BufferRef out;              // [row][out_stride]
  BufferRef part_o, part_ml;  // split path: [n_chunks][plane_stride][Hq][Dh] and [..][2]
};
enum class AttnPath { Split, Fused, Auto };
// Threadgroup bytes the fused kernel needs for G heads per KV group over `width` cells.
uint32_t fused_attention_bytes(uint32_t group, uint32_t width);
bool fused_attention_fits(uint32_t group, uint32_t width);
// max_width: the longest list of the batch (the split path's chunk planes; the fused path's limit).
// Auto takes the fused kernel when it fits. Returns the path taken.
AttnPath encode_attention(Device& dev, const AttnArgs& a, const AttnBuffers& b, uint32_t max_width, AttnPath path,
                          KvFormat fmt = KvFormat::Int8);

// ---- cell lists (cells.h)

inline constexpr uint32_t kSelectThreads = 256;
// Indexer scores of every row's candidates, then the lists. a.window > 0 (list mode).
void encode_indexer_scores(Device& dev, const CellArgs& a, BufferRef iq, BufferRef iw, BufferRef ik, BufferRef scores,
                           uint32_t max_candidates);
void encode_select_cells(Device& dev, const CellArgs& a, BufferRef scores, BufferRef lists, BufferRef n_cells);

}  // namespace strata::mtl
