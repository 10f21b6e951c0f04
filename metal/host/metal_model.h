#pragma once
// A whole strata / qwen3moe model run through the Metal kernels (SPEC §3): the decode-step walk of
// docs/engine.md encoded with the dispatch plan (dispatch.h) against any Device — the emulator
// (STRATA_BACKEND=metal-emu: every kernel on the threadgroup emulator, slowly) or metal-cpp on a Mac.
// Weights are wrapped, not copied, where the device allows; K/V cells (int8 for strata, f32 for
// qwen3moe), indexer keys and scratch are device buffers allocated once; the host only fills the
// per-chunk tokens, RoPE angles (the CPU's Rope::angles, so positions encode identically) and the
// drafter's cell lists, and reads the logits back.
//
// A session backend (engine::DecodeTarget): eval with the logits of the last row or of every row
// (verification windows; rows >= draft_from_row routed with the MOCE draft parameters), rollback,
// commit, checkpoint / restore (exact: main cells carry write stamps, a stale checkpoint is refused),
// and the MTP drafter with the cell protocol of draft::DraftCells (SPEC §2.6, docs/drafting.md):
//   - every eval from p0 first calls wrote(p0, 0) — wrote(p0 − 1, 0) when it re-encodes drafter cell
//     p0 − 1 (its streams are held) or when that cell was encoded with another token than the one
//     now fed at p0 (and cannot be re-encoded); skipped when no valid cell lies there (DraftCells
//     would read a write past its run as a gap and drop the run);
//   - after each chunk the drafter encodes the K/V of every row whose next token became known
//     (start−1 .. start+n−2, K/V only: qsa_prep's kv_only rows, R-8) and reports them with wrote();
//   - draft_begin(p, t) / draft_step(): step 0 at cell p writes p's committed K/V (wrote(p, 1)), step
//     j > 0 writes speculative chain cells without wrote(); every draft row attends to exactly
//     DraftCells::draft_row_cells(pos) (sink ∪ [max(run_begin, pos − W), pos]), checked with
//     check_reads() and against the ground-truth CellLedger (Internal error on any bad read).
// The drafter's fc_hidden runs over the n streams as one GEMV, its attention through the fused
// kernel when the list fits, never with indexer state.
#include <cstdint>
#include <memory>
#include <vector>

#include "metal/host/cell_ledger.h"
#include "metal/host/device.h"
#include "metal/host/tiles.h"
#include "strata/draft/draft_cells.h"
#include "strata/engine/decode_target.h"
#include "strata/engine/rope.h"
#include "strata/model/model.h"
#include "strata/routing/router.h"

namespace strata::mtl {

struct MetalModelConfig {
  int max_rows = 32;         // rows per chunk (and the most logit rows of one chunk)
  int64_t max_ctx = 0;       // cells; 0 = min(context_length, 4096)
  GemvTiles tiles;           // main model
  GemvTiles drafter_tiles;   // the MTP layer (STRATA_METAL_MTP_TILE: drafter_tiles_from_env())
  int64_t mtp_sink = 64;     // STRATA_METAL_MTP_SINK: 0..1024
  int64_t mtp_window = 256;  // STRATA_METAL_MTP_WIN: 1..2051 (a draft row reads W + 1 window cells)
  bool encode_mtp = true;    // encode MTP cells during eval (no effect without an MTP layer)
  // Expert selection of the main model. The Metal path has no expert store, hence no residency map:
  // MOCE's bonuses apply only to resident experts, so selection is plain top-K whatever these are
  // (as the CPU backend in mmap mode); they are passed to the router kernel all the same.
  routing::MoceParams moce;
};

// Opaque state for restore(): lengths, write clocks and the drafter's cell bookkeeping.
struct MetalCheckpoint {
  int64_t n_past = 0, n_committed = 0;
  uint64_t stamp = 0;      // main write clock
  uint64_t mtp_clock = 0;  // drafter write clock
  draft::DraftCells cells;
  const void* owner = nullptr;
};

class MetalModel final : public engine::DecodeTarget {
 public:
  MetalModel(Device& dev, const model::Model& m, const MetalModelConfig& cfg = {});
  ~MetalModel() override;
  MetalModel(const MetalModel&) = delete;
  MetalModel& operator=(const MetalModel&) = delete;

  // ---- engine::DecodeTarget
  int n_vocab() const override { return static_cast<int>(hp_.n_vocab); }
  int64_t max_ctx() const override { return max_ctx_; }
  int64_t n_past() const override { return n_past_; }
  bool has_drafter() const override { return mtp_ != nullptr; }
  int draft_vocab() const override { return mtp_ ? static_cast<int>(hp_.mtp_vocab) : 0; }
  const int32_t* draft_vocab_ids() const override;
  // Runs tokens[0..n) at positions start.. (start <= n_past(), start + n <= max_ctx) in chunks of
  // max_rows. logits_out: nullptr, V floats (Last) or n·V floats (All). Rows >= draft_from_row (>= 0)
  // are draft rows of a verification window (the router's MOCE draft flag, R-1); -1 = none.
  void eval(const int32_t* tokens, int64_t n, int64_t start, engine::LogitRows which, float* logits_out,
            int64_t draft_from_row) override;
  void rollback(int64_t n) override;
  bool draft_ready(int64_t p) const override { return mtp_ != nullptr && streams_at(p) != nullptr; }
  void draft_begin(int64_t p, int32_t next_token) override;
  int32_t draft_step(float* logits_out) override;

  // Last-row logits (V floats) or nullptr.
  void eval(const int32_t* tokens, int64_t n, int64_t start, float* logits_out) {
    eval(tokens, n, start, logits_out ? engine::LogitRows::Last : engine::LogitRows::None, logits_out, -1);
  }
  int64_t n_committed() const { return n_committed_; }
  // Keeps exactly n cells (n_committed <= n <= n_past) and marks them committed.
  void commit(int64_t n);
  MetalCheckpoint checkpoint() const;
  // Back to a checkpoint of this model; refused (Value) if a cell it keeps was rewritten since.
  void restore(const MetalCheckpoint& cp);

  // Final streams [n][d] (before the HyperHead) of position p while held (rows of the last eval
  // chunk, or the carried row); nullptr otherwise.
  const float* streams_at(int64_t p) const;
  // The final streams of the last row of the last eval (empty when not held).
  std::vector<float> last_streams() const;

  bool has_mtp() const { return mtp_ != nullptr; }
  // n_steps chained draft steps from position p (its streams held) and the next token t_{p+1}:
  // draft_begin(p, next_token) then n_steps draft_step()s. tokens_out: [n_steps] vocabulary ids;
  // logits_out: [n_steps][Vr] or nullptr.
  void mtp_draft(int64_t p, int32_t next_token, int n_steps, float* logits_out, int32_t* tokens_out);
  // Whether drafter cell c holds committed K/V by the bookkeeping (DraftCells).
  bool mtp_cell_valid(int64_t c) const { return mtp_ != nullptr && c >= 0 && c < max_ctx_ && dcells_.valid(static_cast<int32_t>(c)); }
  const draft::DraftCells& draft_cells() const { return dcells_; }
  const CellLedger& ledger() const { return ledger_; }
  // The cells the last draft row attended to.
  const std::vector<int32_t>& last_draft_row_cells() const { return list_; }

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
  void run_chunk(const int32_t* tokens, int R, int64_t start, engine::LogitRows which, float* logits_out,
                 int draft_from_row);
  void hc_enter(const Layer& L, BufferRef X, bool ffn, int R);
  // host_list: a draft row's explicit cell list (one row), or nullptr for the block's own rule.
  void attention(const Layer& L, const Cells& c, BufferRef X, int R, int64_t start, bool kv_only,
                 const std::vector<int32_t>* host_list = nullptr);
  void moe(const Layer& L, BufferRef X, int status_slot, int R, int draft_from_row, bool main);
  void head(BufferRef xrows, int rows, BufferRef fn, BufferRef base, BufferRef scale, BufferRef norm,
            const DevWeight& out, BufferRef logits);
  void mtp_inputs(BufferRef H, int m);
  void mtp_encode(int64_t chunk_start, const int32_t* tokens, int R);
  void gemv(const DevWeight& w, BufferRef x, uint32_t nx, uint32_t x_stride, BufferRef y, uint32_t y_stride);
  void end_chain() { chain_ = {}; chain_step_ = 0; }
  // DraftCells rule 1: every drafter cell at or past c0 is stale.
  void drafter_stale_from(int64_t c0);

  Device& dev_;
  const model::Model& m_;
  const model::HParams& hp_;
  MetalModelConfig cfg_;
  int64_t max_ctx_ = 0;
  int64_t n_past_ = 0;
  int64_t n_committed_ = 0;
  engine::Rope rope_;
  std::vector<std::unique_ptr<Buffer>> owned_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Cells> cells_;  // per main layer
  std::unique_ptr<Mtp> mtp_;
  const GemvTiles* tiles_ = nullptr;  // the tiles of the block being encoded
  DevWeight tok_embd_, output_;
  BufferRef output_norm_, head_fn_, head_base_, head_scale_;

  // Session state: the rows X_ holds (the last chunk), the carried row, write clocks.
  int64_t last_start_ = 0;
  int last_rows_ = 0;
  int64_t carry_pos_ = -1;           // position whose final streams carry_ holds
  uint64_t stamp_ = 0;               // main write clock (per chunk)
  std::vector<uint64_t> cell_stamp_; // [max_ctx] main cells: the clock of their last write
  // Drafter: the bookkeeping (what a draft row reads), the ground truth (CellLedger), the next token
  // each drafter cell was encoded with (-1: a chain cell or none), write stamps, the current chain.
  draft::DraftCells dcells_;
  CellLedger ledger_;
  std::vector<int32_t> mtp_next_;
  std::vector<uint64_t> mtp_stamp_;
  uint64_t mtp_clock_ = 0;
  CellLedger::Chain chain_;
  int chain_step_ = 0;
  int32_t chain_token_ = -1;  // the token the chain's next step embeds
  uint64_t rounds_ = 0;
  std::vector<int32_t> list_;  // the draft row's cells (capacity sink + window + 1)

  // Cells and scratch (see metal_model.cpp for shapes).
  uint32_t list_stride_ = 0, n_chunks_ = 0, max_cand_ = 0;
  BufferRef tokens_, carry_, rope_cs_, emb_, X_, flat_, mix_, post_, comb_, collapsed_, xn_, q_, k_, v_, qh_, att_, out_,
      ones_, lists_, n_cells_, iq_, iw_, iscores_, part_o_, part_ml_, rlogits_, ids_, rw_, status_, plan_hdr_,
      plan_ge_, plan_go_, plan_se_, plan_es_, ge_, ue_, routed_, sg_, su_, shared_, shgate_, h_, hn_, logits_;
};

}  // namespace strata::mtl
