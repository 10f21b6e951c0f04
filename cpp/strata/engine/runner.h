#pragma once
// One sequence on the CPU: an engine::Sequence (the decode protocol, engine/sequence.h) over the
// CpuForward backend (the main Window and the MTP drafter, engine/cpu_forward.h), built from one
// RunnerConfig. The behaviour the PyTorch ReferenceRunner mirrors (python/strata_train/runner.py).
#include <cstdint>
#include <memory>
#include <optional>

#include "strata/engine/cpu_forward.h"
#include "strata/engine/sequence.h"

namespace strata::engine {

struct RunnerConfig {
  int n_threads = 0;                   // 0 = the global pool; > 0 = a pool of this many threads of its own
  int64_t max_ctx = 0;                 // cells; 0 = min(context_length, 32768)
  int max_rows = 512;                  // rows per chunk
  int64_t mtp_sink = 64;               // drafter sink cells (STRATA_METAL_MTP_SINK, 0..1024)
  int64_t mtp_window = 256;            // drafter window (STRATA_METAL_MTP_WIN, 1..2051): a draft row reads W + 1 cells
  bool encode_mtp = true;              // encode MTP cells during eval (no effect without an MTP layer)
  experts::ExpertStoreConfig experts;  // where the routed experts come from (docs/experts.md)
  routing::MoceParams moce;            // expert selection of the main window
  bool drafter_resident = false;       // stream mode: the drafter routes among resident experts (MtpConfig)
  model::DrafterRequant mtp_requant = model::DrafterRequant::Off;  // R-11 (STRATA_METAL_MTP_Q4 / _Q5)
  bool mtp_head_q4 = false;  // MtpConfig::head_q4 (STRATA_METAL_MTP_DRAFT_Q4's head part, on in the product)
  std::optional<cpu::RepackMode> repack;  // repacked weights (cpu/repack/repack.h); nullopt = STRATA_REPACK
};

class Runner final : public Sequence {
 public:
  Runner(std::unique_ptr<model::Model> model, const RunnerConfig& cfg);
  // Over a model prepared already and shared (engine/prepared_model.h; mmap mode only).
  Runner(std::shared_ptr<const PreparedModel> prepared, const RunnerConfig& cfg);

  const model::Model& model() const { return cpu().model(); }
  const model::RepackReport& repack_report() const { return cpu().repack_report(); }
  Window& window() { return cpu().window(); }
  const Window& window() const { return cpu().window(); }
  Mtp& mtp();
  const RunnerConfig& config() const { return cfg_; }
  experts::ExpertStore& expert_store() { return cpu().expert_store(); }
  void set_moce(const routing::MoceParams& p) { window().set_moce(p); }

 private:
  CpuForward& cpu() { return static_cast<CpuForward&>(backend()); }
  const CpuForward& cpu() const { return static_cast<const CpuForward&>(backend()); }
  RunnerConfig cfg_;
};

}  // namespace strata::engine
