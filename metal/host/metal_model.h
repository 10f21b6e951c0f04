#pragma once
// A whole strata / qwen3moe model run through the Metal kernels (SPEC §3): the decode-step walk of
// docs/engine.md encoded with the dispatch plan (dispatch.h) against any Device — the emulator
// (STRATA_BACKEND=metal-emu: every kernel on the threadgroup emulator, slowly) or metal-cpp on a Mac.
// Weights are wrapped, not copied, where the device allows; K/V cells, indexer keys and scratch are
// device buffers allocated once; the host only fills the per-chunk tokens and RoPE angles (the
// CPU's Rope::angles, so positions encode identically) and reads the logits back.
//
// With an MTP layer, eval() also encodes the drafter's cells the way engine::Runner does (positions
// start-1 .. start+n-2, K/V only: qsa_prep's kv_only rows, R-8), and mtp_draft() runs chained draft
// steps: fc_embedding, fc_hidden over the n streams as one GEMV, the block over the drafter's
// own sink + window cells (the fused attention when the list fits, R-6; never indexer state), the MTP
// HyperHead and the restricted-vocab head.
#include <cstdint>
#include <memory>
#include <vector>

#include "metal/host/device.h"
#include "metal/host/tiles.h"
#include "strata/engine/rope.h"
#include "strata/model/model.h"

namespace strata::mtl {

struct MetalModelConfig {
  int max_rows = 32;         // rows per chunk
  int64_t max_ctx = 0;       // cells; 0 = min(context_length, 4096)
  GemvTiles tiles;           // main model
  GemvTiles drafter_tiles;   // the MTP layer (STRATA_METAL_MTP_TILE: drafter_tiles_from_env())
  int64_t mtp_sink = 64;     // STRATA_METAL_MTP_SINK
  int64_t mtp_window = 256;  // STRATA_METAL_MTP_WIN (0: every causal cell)
  bool encode_mtp = true;    // encode MTP cells during eval (no effect without an MTP layer)
};

class MetalModel {
 public:
  MetalModel(Device& dev, const model::Model& m, const MetalModelConfig& cfg = {});
  ~MetalModel();
  MetalModel(const MetalModel&) = delete;
  MetalModel& operator=(const MetalModel&) = delete;

  // Runs tokens[0..n) at positions start.. (start <= n_past(), start + n <= max_ctx), in chunks of
  // max_rows. logits_out: V floats of the last row, or nullptr.
  void eval(const int32_t* tokens, int64_t n, int64_t start, float* logits_out);
  int64_t n_past() const { return n_past_; }
  int64_t max_ctx() const { return max_ctx_; }
  // The final streams [n][d] of the last row of the last eval (before the HyperHead).
  std::vector<float> last_streams() const;

  bool has_mtp() const { return mtp_ != nullptr; }
  // n_steps chained draft steps from the streams of position p (held from the last eval: p must be
  // its last row) and the next token t_{p+1}: step j runs at p + j. tokens_out: [n_steps] vocabulary
  // ids; logits_out: [n_steps][Vr] or nullptr.
  void mtp_draft(int64_t p, int32_t next_token, int n_steps, float* logits_out, int32_t* tokens_out);

 private:
  struct DevWeight {
    BufferRef ref;
    quant::GGMLType type = quant::GGMLType::F32;
    uint32_t rows = 0, cols = 0, row_bytes = 0, expert_bytes = 0;
  };
  struct Layer;
  struct Mtp;
  // Where a block's attention reads and writes: its cells and their selection rule.
  struct Cells {
    BufferRef k8, ks, v8, vs, ik;
    bool indexer = false;
    uint32_t sink = 0, window = 0, top_k = 0, list_stride = 0;
  };

  BufferRef wrap(const void* p, std::size_t bytes);
  DevWeight weight(const model::Weight& w);
  DevWeight experts(const model::ExpertWeights& w);
  BufferRef scratch(std::size_t bytes);

  std::unique_ptr<Layer> bind_layer(const model::LayerWeights& lw);
  void run_chunk(const int32_t* tokens, int R, int64_t start, float* logits_out);
  void hc_enter(const Layer& L, BufferRef X, bool ffn, int R);
  void attention(const Layer& L, const Cells& c, BufferRef X, int R, int64_t start, bool kv_only);
  void moe(const Layer& L, BufferRef X, int status_slot, int R);
  void head(BufferRef xrow, BufferRef fn, BufferRef base, BufferRef scale, BufferRef norm, const DevWeight& out,
            BufferRef logits);
  void mtp_inputs(BufferRef H, int m);
  void mtp_encode(int64_t chunk_start, const int32_t* tokens, int R);
  void gemv(const DevWeight& w, BufferRef x, uint32_t nx, uint32_t x_stride, BufferRef y, uint32_t y_stride);

  Device& dev_;
  const model::Model& m_;
  const model::HParams& hp_;
  MetalModelConfig cfg_;
  int64_t max_ctx_ = 0;
  int64_t n_past_ = 0;
  int last_rows_ = 0;
  engine::Rope rope_;
  std::vector<std::unique_ptr<Buffer>> owned_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Cells> cells_;  // per main layer
  std::unique_ptr<Mtp> mtp_;
  const GemvTiles* tiles_ = nullptr;  // the tiles of the block being encoded
  DevWeight tok_embd_, output_;
  BufferRef output_norm_, head_fn_, head_base_, head_scale_;

  // Cells and scratch (see metal_model.cpp for shapes).
  uint32_t list_stride_ = 0, n_chunks_ = 0, max_cand_ = 0;
  int64_t carry_pos_ = -1;  // position whose final streams carry_ holds
  BufferRef tokens_, carry_, rope_cs_, emb_, X_, flat_, mix_, post_, comb_, collapsed_, xn_, q_, k_, v_, qh_, att_, out_,
      ones_, lists_, n_cells_, iq_, iw_, iscores_, part_o_, part_ml_, rlogits_, ids_, rw_, status_, plan_hdr_,
      plan_ge_, plan_go_, plan_se_, plan_es_, ge_, ue_, routed_, sg_, su_, shared_, shgate_, h_, hn_, logits_;
};

}  // namespace strata::mtl
