#pragma once
// The CPU backend of engine::Sequence: the main model's Window and the MTP drafter (engine/mtp.h)
// over one expert store and thread pool. Forward pieces only; the sequence protocol is Sequence's.
#include <cstdint>
#include <memory>
#include <optional>

#include "strata/engine/mtp.h"
#include "strata/engine/prepared_model.h"
#include "strata/engine/sequence_backend.h"
#include "strata/engine/window.h"
#include "strata/experts/expert_store.h"
#include "strata/model/drafter_requant.h"
#include "strata/model/model.h"
#include "strata/model/weight_repack.h"
#include "strata/routing/router.h"

namespace strata {
class ThreadPool;
}

namespace strata::engine {

struct CpuForwardConfig {
  int n_threads = 0;      // 0 = the global pool; > 0 = a pool of this many threads of its own
  int64_t max_ctx = 0;    // cells; 0 = min(context_length, 32768)
  int max_rows = 512;     // rows per chunk
  int64_t mtp_sink = 64;  // the drafter's sink and window (SequenceConfig's): size its lists
  int64_t mtp_window = 256;
  experts::ExpertStoreConfig experts;  // where the routed experts come from (docs/experts.md)
  routing::MoceParams moce;            // expert selection of the main window
  bool drafter_resident = false;       // stream mode: the drafter routes among resident experts (MtpConfig)
  model::DrafterRequant mtp_requant = model::DrafterRequant::Off;  // low-bit drafter weights
  bool mtp_head_q4 = false;                                        // the head's part: MtpConfig::head_q4
  std::optional<cpu::RepackMode> repack;  // repacked weights (cpu/repack/repack.h); nullopt = STRATA_REPACK
};

// Throws Value unless n_threads is in [0, 1024] (the pool sizes an engine accepts).
void check_n_threads(int n_threads);

class CpuForward final : public SequenceBackend {
 public:
  // Prepares `model` itself (drafter requant, repack) for this engine alone.
  CpuForward(std::unique_ptr<model::Model> model, const CpuForwardConfig& cfg);
  // Over a model prepared already and shared with other engines (engine/prepared_model.h): mmap mode
  // only, with the settings it was prepared under (cfg.repack and cfg.mtp_requant are not read).
  CpuForward(std::shared_ptr<const PreparedModel> prepared, const CpuForwardConfig& cfg);
  ~CpuForward() override;

  const model::Model& model() const { return *prepared_->model; }
  Window& window() { return *window_; }
  const Window& window() const { return *window_; }
  Mtp* mtp() { return mtp_.get(); }
  experts::ExpertStore& expert_store() { return *experts_; }
  const model::RepackReport& repack_report() const { return prepared_->repack; }

  const model::HParams& hparams() const override { return model().hparams(); }
  int64_t max_ctx() const override { return window_->max_ctx(); }
  int max_rows() const override { return window_->max_rows(); }
  int max_logit_rows() const override { return window_->max_logit_rows(); }
  bool has_drafter() const override { return mtp_ != nullptr; }
  const int32_t* draft_vocab_ids() const override { return mtp_ ? mtp_->vocab_ids() : nullptr; }
  void set_length(int64_t n) override;
  void run_rows(const int32_t* tokens, int R, int64_t start, LogitRows which, float* logits_out,
                int draft_from_row) override;
  int run_window(const int32_t* tokens, int R, int64_t start, float* logits_out, int draft_from_row,
                 int cut_from_row) override;
  const float* row_streams(int r) const override { return window_->final_streams(r); }
  void draft_encode(const float* H, const int32_t* next_tokens, int m, int64_t q0) override;
  int32_t draft_row(const float* H, int32_t token, int64_t pos, std::span<const int32_t> cells, float* logits_out,
                    float* streams_out, bool chained) override;

 private:
  void copy_logits(int rows, float* out) const;  // the last run's first `rows` logit rows into out
  ThreadPool* make_pool(const CpuForwardConfig& cfg);
  void build(const CpuForwardConfig& cfg, const experts::ExpertStoreConfig& ec, ThreadPool* pool);

  std::shared_ptr<const PreparedModel> prepared_;  // the weights, maybe shared with other engines
  std::unique_ptr<ThreadPool> own_pool_;
  std::unique_ptr<experts::ExpertStore> experts_;  // before the window and MTP that use it
  std::unique_ptr<Window> window_;
  std::unique_ptr<Mtp> mtp_;
};

}  // namespace strata::engine
