#include "strata/engine/runner.h"

#include <string>

#include "strata/util/error.h"

namespace strata::engine {
namespace {

void check_drafter_lists(const model::Model& model, const RunnerConfig& cfg) {
  if (model.mtp && (cfg.mtp_sink < 0 || cfg.mtp_sink > 1024 || cfg.mtp_window < 1 || cfg.mtp_window > 2051))
    throw_error(ErrorKind::Value, "Runner: drafter sink " + std::to_string(cfg.mtp_sink) + " / window " +
                                      std::to_string(cfg.mtp_window) + " must be in [0, 1024] / [1, 2051]");
}

CpuForwardConfig forward_config(const RunnerConfig& cfg) {
  CpuForwardConfig c;
  c.n_threads = cfg.n_threads;
  c.max_ctx = cfg.max_ctx;
  c.max_rows = cfg.max_rows;
  c.mtp_sink = cfg.mtp_sink;
  c.mtp_window = cfg.mtp_window;
  c.experts = cfg.experts;
  c.moce = cfg.moce;
  c.drafter_resident = cfg.drafter_resident;
  c.mtp_requant = cfg.mtp_requant;
  c.mtp_head_q4 = cfg.mtp_head_q4;
  c.repack = cfg.repack;
  return c;
}

std::unique_ptr<SequenceBackend> cpu_backend(std::unique_ptr<model::Model> model, const RunnerConfig& cfg) {
  if (!model) throw_error(ErrorKind::Value, "Runner: no model");
  check_drafter_lists(*model, cfg);
  return std::make_unique<CpuForward>(std::move(model), forward_config(cfg));
}

std::unique_ptr<SequenceBackend> cpu_backend(std::shared_ptr<const PreparedModel> prepared, const RunnerConfig& cfg) {
  if (!prepared || !prepared->model) throw_error(ErrorKind::Value, "Runner: no model");
  check_drafter_lists(*prepared->model, cfg);
  return std::make_unique<CpuForward>(std::move(prepared), forward_config(cfg));
}

SequenceConfig sequence_of(const RunnerConfig& cfg) {
  SequenceConfig s;
  s.mtp_sink = cfg.mtp_sink;
  s.mtp_window = cfg.mtp_window;
  s.encode_mtp = cfg.encode_mtp;
  return s;
}

}  // namespace

Runner::Runner(std::unique_ptr<model::Model> model, const RunnerConfig& cfg)
    : Sequence(cpu_backend(std::move(model), cfg), sequence_of(cfg)), cfg_(cfg) {}

Runner::Runner(std::shared_ptr<const PreparedModel> prepared, const RunnerConfig& cfg)
    : Sequence(cpu_backend(std::move(prepared), cfg), sequence_of(cfg)), cfg_(cfg) {}

Mtp& Runner::mtp() {
  Mtp* m = cpu().mtp();
  if (!m) throw_error(ErrorKind::Value, "this model has no MTP layer (nextn_predict_layers = 0)");
  return *m;
}

}  // namespace strata::engine
