#include "strata/engine/cpu_forward.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/cpu/repack/repack.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::engine {

void check_n_threads(int n_threads) {
  if (n_threads < 0 || n_threads > 1024)
    throw_error(ErrorKind::Value, "cpu backend: n_threads = " + std::to_string(n_threads) + " must be in [0, 1024]");
}

ThreadPool* CpuForward::make_pool(const CpuForwardConfig& cfg) {
  check_n_threads(cfg.n_threads);
  if (cfg.n_threads == 0) return &ThreadPool::global();
  own_pool_ = std::make_unique<ThreadPool>(cfg.n_threads);
  return own_pool_.get();
}

CpuForward::CpuForward(std::unique_ptr<model::Model> model, const CpuForwardConfig& cfg) {
  if (!model) throw_error(ErrorKind::Value, "cpu backend: no model");
  ThreadPool* pool = make_pool(cfg);
  experts::ExpertStoreConfig ec = cfg.experts;
  ec.repack = cfg.repack.value_or(cpu::repack_mode());
  const bool stream = ec.mode == experts::ExpertMode::Stream;
  // A streaming store first: its mapping advice (mapping_advice.h) must precede the load-time reads
  // below, whose read-around would otherwise pull expert bytes in (and read-ahead still in flight when
  // the store dropped the expert ranges stayed cached). Neither read changes a routed expert's view.
  if (stream) experts_ = std::make_unique<experts::ExpertStore>(experts::expert_layout(*model), ec);
  // R-11 and the repacked weights, before any view is taken; stream-mode experts repack as they arrive.
  prepared_ = prepare_cpu_model(std::move(model), cfg.mtp_requant, ec.repack, !stream, pool);
  build(cfg, ec, pool);
}

CpuForward::CpuForward(std::shared_ptr<const PreparedModel> prepared, const CpuForwardConfig& cfg)
    : prepared_(std::move(prepared)) {
  if (!prepared_ || !prepared_->model) throw_error(ErrorKind::Value, "cpu backend: no model");
  if (cfg.experts.mode != experts::ExpertMode::Mmap)
    throw_error(ErrorKind::Internal, "cpu backend: a shared prepared model serves mmap mode only");
  ThreadPool* pool = make_pool(cfg);
  experts::ExpertStoreConfig ec = cfg.experts;
  ec.repack = prepared_->repack.mode;
  build(cfg, ec, pool);
}

void CpuForward::build(const CpuForwardConfig& cfg, const experts::ExpertStoreConfig& ec, ThreadPool* pool) {
  const model::HParams& hp = model().hparams();
  // mmap mode: the store takes the views the repack made.
  if (!experts_) experts_ = std::make_unique<experts::ExpertStore>(experts::expert_layout(model()), ec);
  WindowConfig wc;
  wc.max_ctx = cfg.max_ctx;
  wc.max_rows = cfg.max_rows;
  wc.pool = pool;
  wc.experts = experts_.get();
  wc.moce = cfg.moce;
  const bool with_mtp = model().mtp.has_value();
  const int64_t ctx = cfg.max_ctx > 0 ? cfg.max_ctx : std::min<int64_t>(hp.context_length, 32768);
  // The Mtp's own policy in the cell_select convention (sinks + (p - W', p]) with W' = W + 1 is the
  // draft row's list when the run covers the window; lists hold sink + W' + 1 entries at most.
  if (with_mtp) wc.extra_list = std::min(ctx, cfg.mtp_sink + cfg.mtp_window + 2);
  window_ = std::make_unique<Window>(model(), wc);
  if (with_mtp) {
    MtpConfig mc;
    mc.sink = cfg.mtp_sink;
    mc.window = cfg.mtp_window + 1;
    mc.max_ctx = window_->max_ctx();
    mc.max_rows = cfg.max_rows;
    mc.pool = pool;
    mc.experts = experts_.get();
    mc.expert_layer = static_cast<int>(hp.moe_layers());  // expert_layout puts the MTP block after the main layers
    mc.resident_only = cfg.drafter_resident;
    mc.head_q4 = cfg.mtp_head_q4;
    mtp_ = std::make_unique<Mtp>(model(), mc, &window_->scratch());
  }
}

CpuForward::~CpuForward() = default;

void CpuForward::set_length(int64_t n) {
  Window& w = *window_;
  if (n <= w.n_past()) {
    w.rollback(n);
    return;
  }
  // Longer than the window's length (a restore after a rollback): the sequence vouches for the
  // cells (their write stamps are its own), so the window takes them as they are.
  Checkpoint cp = w.checkpoint();
  cp.n_past = n;
  cp.n_committed = std::min(cp.n_committed, n);
  w.restore(cp);
}

void CpuForward::run_rows(const int32_t* tokens, int R, int64_t start, LogitRows which, float* logits_out,
                          int draft_from_row) {
  window_->run(tokens, R, start, which, draft_from_row);
  if (logits_out != nullptr && which != LogitRows::None) copy_logits(which == LogitRows::All ? R : 1, logits_out);
}

int CpuForward::run_window(const int32_t* tokens, int R, int64_t start, float* logits_out, int draft_from_row,
                           int cut_from_row) {
  const int ran = window_->run(tokens, R, start, LogitRows::All, draft_from_row, cut_from_row);
  copy_logits(ran, logits_out);
  return ran;
}

void CpuForward::copy_logits(int rows, float* out) const {
  const std::size_t V = model().hparams().n_vocab;
  for (int r = 0; r < rows; ++r)
    std::memcpy(out + static_cast<std::size_t>(r) * V, window_->logits(r), V * sizeof(float));
}

void CpuForward::draft_encode(const float* H, const int32_t* next_tokens, int m, int64_t q0) {
  mtp_->encode(H, next_tokens, m, q0);
}

int32_t CpuForward::draft_row(const float* H, int32_t token, int64_t pos, std::span<const int32_t> cells,
                              float* logits_out, float* streams_out, bool chained) {
  Mtp& m = *mtp_;
  m.run_row(H, token, pos, cells.data(), static_cast<int64_t>(cells.size()), true,
            chained ? MtpState::Chained : MtpState::Main);
  if (logits_out) std::memcpy(logits_out, m.draft_logits(0), static_cast<std::size_t>(m.vocab_size()) * sizeof(float));
  const model::HParams& hp = model().hparams();
  std::memcpy(streams_out, m.out_streams(0), static_cast<std::size_t>(hp.hc_count) * hp.n_embd * sizeof(float));
  return m.draft_token(0);
}

}  // namespace strata::engine
