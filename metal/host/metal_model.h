#pragma once
// A whole strata / qwen3moe model run through the Metal kernels (SPEC §3): the forward pieces of
// engine::SequenceBackend encoded with the dispatch plan (dispatch.h) against any Device — the
// emulator (backend "metal-emu": every kernel on the threadgroup emulator, slowly) or metal-cpp on a
// Mac. Weights are wrapped, not copied, where the device allows; K/V cells (int8 for strata, f32 for
// qwen3moe), indexer keys and scratch are device buffers allocated once; the host only fills the
// per-chunk tokens, RoPE angles (the CPU's Rope::angles, so positions encode identically) and the
// drafter's cell lists, and reads the logits back. The sequence itself (lengths, drafter cell
// bookkeeping, chains, checkpoints) is engine::Sequence's: metal_sequence() builds one over this.
//
// The main rows' logits: of the last row or of every row (rows >= draft_from_row routed with the
// MOCE draft parameters, R-1). The drafter's K/V of committed rows are written K/V-only (qsa_prep's
// kv_only rows, R-8); a draft row attends to exactly the host's cell list, its fc_hidden runs over
// the n streams as one GEMV, its attention through the fused kernel when the list fits.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "metal/host/device.h"
#include "metal/host/tiles.h"
#include "strata/engine/rope.h"
#include "strata/engine/sequence.h"
#include "strata/engine/sequence_backend.h"
#include "strata/model/model.h"
#include "strata/routing/router.h"

namespace strata::mtl {

struct MetalModelConfig {
  int max_rows = 32;            // rows per chunk (and the most logit rows of one chunk)
  int64_t max_ctx = 0;          // cells; 0 = min(context_length, 4096)
  GemvTiles tiles;              // main model
  GemvTiles drafter_tiles;      // the MTP layer (Config.metal_mtp_tile, STRATA_METAL_MTP_TILE)
  int64_t max_draft_cells = 0;  // the most cells a draft row reads: drafter sink + window + 1 (0 = 64 + 256 + 1)
  // Expert selection of the main model. The Metal path has no expert store, hence no residency map:
  // MOCE's bonuses apply only to resident experts, so selection is plain top-K whatever these are
  // (as the CPU backend in mmap mode); they are passed to the router kernel all the same.
  routing::MoceParams moce;
};

class MetalModel final : public engine::SequenceBackend {
 public:
  MetalModel(Device& dev, const model::Model& m, const MetalModelConfig& cfg = {});
  ~MetalModel() override;
  MetalModel(const MetalModel&) = delete;
  MetalModel& operator=(const MetalModel&) = delete;

  // ---- engine::SequenceBackend
  const model::HParams& hparams() const override { return hp_; }
  int64_t max_ctx() const override { return max_ctx_; }
  int max_rows() const override { return cfg_.max_rows; }
  int max_logit_rows() const override { return cfg_.max_rows; }
  bool has_drafter() const override { return mtp_ != nullptr; }
  const int32_t* draft_vocab_ids() const override;
  void set_length(int64_t) override {}  // the device cells need no length: lists come from positions
  void run_rows(const int32_t* tokens, int R, int64_t start, engine::LogitRows which, float* logits_out,
                int draft_from_row) override;
  const float* row_streams(int r) const override;
  void draft_encode(const float* H, const int32_t* next_tokens, int m, int64_t q0) override;
  int32_t draft_row(const float* H, int32_t token, int64_t pos, std::span<const int32_t> cells, float* logits_out,
                    float* streams_out, bool chained) override;

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
    bool f32 = false;  // f32 K/V (qwen3moe) instead of int8 + fp16 scales
    bool indexer = false;
    uint32_t sink = 0, window = 0, top_k = 0, list_stride = 0;
  };

  BufferRef wrap(const void* p, std::size_t bytes);
  DevWeight weight(const model::Weight& w);
  DevWeight experts(const model::ExpertWeights& w);
  BufferRef scratch(std::size_t bytes);

  std::unique_ptr<Layer> bind_layer(const model::LayerWeights& lw);
  void hc_enter(const Layer& L, BufferRef X, bool ffn, int R);
  // host_list: a draft row's explicit cell list (one row), or empty for the block's own rule.
  void attention(const Layer& L, const Cells& c, BufferRef X, int R, int64_t start, bool kv_only,
                 std::span<const int32_t> host_list = {});
  void moe(const Layer& L, BufferRef X, int status_slot, int R, int draft_from_row, bool main);
  void head(BufferRef xrows, int rows, BufferRef fn, BufferRef base, BufferRef scale, BufferRef norm,
            const DevWeight& out, BufferRef logits);
  void mtp_inputs(BufferRef H, int m);
  void gemv(const DevWeight& w, BufferRef x, uint32_t nx, uint32_t x_stride, BufferRef y, uint32_t y_stride);

  Device& dev_;
  const model::Model& m_;
  const model::HParams& hp_;
  MetalModelConfig cfg_;
  int64_t max_ctx_ = 0;
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
  BufferRef tokens_, rope_cs_, emb_, X_, flat_, mix_, post_, comb_, collapsed_, xn_, q_, k_, v_, qh_, att_, out_, ones_,
      lists_, n_cells_, iq_, iw_, iscores_, part_o_, part_ml_, rlogits_, ids_, rw_, status_, plan_hdr_, plan_ge_,
      plan_go_, plan_se_, plan_es_, ge_, ue_, routed_, sg_, su_, shared_, shgate_, h_, hn_, logits_;
};

// An engine::Sequence over a MetalModel on `dev` (both must outlive it): the model's drafter lists
// sized for the sequence's sink and window.
std::unique_ptr<engine::Sequence> metal_sequence(Device& dev, const model::Model& m, MetalModelConfig cfg,
                                                 const engine::SequenceConfig& seq);

}  // namespace strata::mtl
