#include "strata/engine/window.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/engine/block.h"
#include "strata/engine/linear.h"
#include "strata/engine/parallel.h"
#include "strata/experts/expert_store.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::engine {
namespace {

// The most rows a window may have for its MoE layers to predict and prefetch the next layer's experts.
constexpr int kPrefetchMaxRows = 16;

int64_t default_ctx(const model::HParams& hp, int64_t asked) {
  if (asked > 0) return asked;
  return std::min<int64_t>(hp.context_length, 32768);
}

bool is_ds4(const model::Model& m) { return m.hparams().arch == model::Arch::DeepSeek4; }

}  // namespace

Window::Window(const model::Model& m, const WindowConfig& cfg)
    : m_(m),
      pool_(cfg.pool ? cfg.pool : &ThreadPool::global()),
      max_ctx_(default_ctx(m.hparams(), cfg.max_ctx)),
      max_rows_(cfg.max_rows),
      max_logit_rows_(0),
      policy_{m.hparams().sink_count, m.hparams().sliding_window,
              m.hparams().uses_indexer() ? m.hparams().indexer_top_k : 0},
      experts_(cfg.experts),
      moce_(cfg.moce),
      kv_(is_ds4(m) ? 1 : static_cast<int>(m.hparams().n_layer), is_ds4(m) ? 1 : std::max<int64_t>(max_ctx_, 1),
          static_cast<int>(m.hparams().n_head_kv), static_cast<int>(m.hparams().head_dim), m.hparams().kv_type,
          m.hparams().uses_indexer() ? static_cast<int>(m.hparams().indexer_dim) : 0),
      rope_(static_cast<int>(m.hparams().rope_dim), m.hparams().rope_base) {
  m.note_cells_built();
  const model::HParams& hp = m.hparams();
  if (max_ctx_ <= 0 || max_ctx_ > 0x7FFFFFFF)
    throw_error(ErrorKind::Value, "Window: max_ctx = " + std::to_string(max_ctx_) + " must be in [1, 2^31)");
  if (max_rows_ < 1 || max_rows_ > 4096)
    throw_error(ErrorKind::Value, "Window: max_rows = " + std::to_string(max_rows_) + " must be in [1, 4096]");
  max_logit_rows_ = cfg.max_logit_rows;
  if (max_logit_rows_ <= 0) {
    const int64_t budget = (int64_t{64} << 20) / (int64_t{4} * hp.n_vocab);
    max_logit_rows_ = static_cast<int>(std::clamp<int64_t>(budget, 16, max_rows_));
  }
  max_logit_rows_ = std::min(max_logit_rows_, max_rows_);
  ScratchShape shape;
  shape.max_rows = max_rows_;
  shape.max_ctx = max_ctx_;
  shape.max_list = std::max<int64_t>(policy_.window > 0 ? max_cells(policy_, max_ctx_) : 1, cfg.extra_list);
  shape.n_slots = parallel_slots_count(pool_);
  scratch_ = std::make_unique<Scratch>(hp, shape);
  streams_.resize(static_cast<std::size_t>(max_rows_) * hp.hc_count * hp.n_embd);
  logits_.resize(static_cast<std::size_t>(max_logit_rows_) * hp.n_vocab);
  cell_stamp_.resize(static_cast<std::size_t>(max_ctx_));
  std::memset(cell_stamp_.data(), 0, sizeof(uint64_t) * cell_stamp_.size());
  if (is_ds4(m)) ds4_ = std::make_unique<Ds4State>(m, max_ctx_, max_rows_, shape.n_slots);
}

int Window::run(const int32_t* tokens, int n, int64_t start, LogitRows which, int draft_from_row, int cut_from_row) {
  const model::HParams& hp = m_.hparams();
  if (n < 1 || n > max_rows_)
    throw_error(ErrorKind::Value,
                "Window::run: " + std::to_string(n) + " rows (must be 1.." + std::to_string(max_rows_) + ")");
  if (start < 0 || start > n_past_)
    throw_error(ErrorKind::Value, "Window::run: start " + std::to_string(start) + " is beyond n_past = " +
                                      std::to_string(n_past_) + " (cells must be written in order)");
  if (start + n > max_ctx_)
    throw_error(ErrorKind::Value, "Window::run: positions up to " + std::to_string(start + n) +
                                      " exceed the context of " + std::to_string(max_ctx_) + " cells");
  if (which == LogitRows::All && n > max_logit_rows_)
    throw_error(ErrorKind::Value, "Window::run: logits for " + std::to_string(n) +
                                      " rows exceed max_logit_rows = " + std::to_string(max_logit_rows_));
  for (int r = 0; r < n; ++r)
    if (tokens[r] < 0 || static_cast<uint32_t>(tokens[r]) >= hp.n_vocab)
      throw_error(ErrorKind::Value, "Window::run: token " + std::to_string(tokens[r]) +
                                        " is outside the vocabulary of " + std::to_string(hp.n_vocab));

  // From here on the cells [start, start+n) are being rewritten.
  ++stamp_;
  for (int64_t c = start; c < start + n; ++c) cell_stamp_[static_cast<std::size_t>(c)] = stamp_;
  n_past_ = start;
  n_committed_ = std::min(n_committed_, start);
  last_rows_ = 0;
  last_logit_rows_ = 0;

  const int64_t d = hp.n_embd, ns = hp.hc_count, nd = ns * d;
  float* X = streams_.data();
  Scratch& s = *scratch_;
  parallel_ranges(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* xr = X + r * nd;
      dequantize_weight_row(m_.tok_embd, tokens[r], xr);
      for (int64_t k = 1; k < ns; ++k) std::memcpy(xr + k * d, xr, sizeof(float) * static_cast<std::size_t>(d));
    }
  });

  BlockContext c;
  c.hp = &hp;
  c.kv = &kv_;
  c.policy = policy_;
  c.use_indexer = hp.uses_indexer();
  c.rope = &rope_;
  c.s = &s;
  c.pool = pool_;
  c.moce = moce_;
  c.draft_from_row = draft_from_row < 0 ? -1 : draft_from_row;
  c.experts = experts_;
  c.ds4 = ds4_.get();
  c.tokens = tokens;
  // Cuts apply where a read can be saved: a store in stream mode (its residency map), not deepseek4
  // (whose per-position compressor state assumes every row of a run reaches the last layer).
  c.cut_from_row = experts_ && !ds4_ ? cut_from_row : -1;
  if (experts_) experts_->begin_window(n);
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    c.w = &m_.layers[l];
    if (ds4_) {
      c.ds4_attn = &m_.ds4_attn[l];
      c.clamp_exp = hp.ds4.clamp_exp[l];
      c.clamp_shexp = hp.ds4.clamp_shexp[l];
    }
    c.kv_layer = static_cast<int>(l);
    // The store numbers MoE layers only (glm4moe's leading dense layers have no experts).
    c.expert_layer = static_cast<int>(hp.expert_layer(l));
    c.resident = experts_ && !hp.dense_layer(l) ? experts_->resident_map(c.expert_layer) : nullptr;  // nullptr: mmap
    // Prefetch for the next MoE layer: stream mode with reader threads, decode steps and verification
    // windows (a prefill chunk needs most experts anyway and leaves no slot free), softmax or sigmoid
    // gating (deepseek4's hashed and sqrt-softplus layers are not predicted), not past the last main layer.
    c.next_moe = c.resident && experts_->prefetches() && n <= kPrefetchMaxRows &&
                         hp.gating != model::Gating::SqrtSoftplus && l + 1 < hp.n_layer && !hp.dense_layer(l + 1)
                     ? &m_.layers[l + 1].moe
                     : nullptr;
    n = run_block(c, X, n, start);
  }
  if (experts_) experts_->end_window();

  n_past_ = start + n;
  last_rows_ = n;
  last_start_ = start;
  if (which != LogitRows::None) {
    const int first = which == LogitRows::Last ? n - 1 : 0;
    const int cnt = n - first;
    head_input(hp, m_.head_hc, m_.output_norm, X + first * nd, cnt, s, s.h.data(), pool_);
    linear(m_.logits_head(), s.h.data(), cnt, logits_.data(), pool_);
    last_logit_rows_ = cnt;
    logits_first_row_ = first;
  }
  return n;
}

const float* Window::logits(int i) const {
  if (i < 0 || i >= last_logit_rows_)
    throw_error(ErrorKind::Value, "Window::logits: row " + std::to_string(i) + " has no logits (the last run kept " +
                                      std::to_string(last_logit_rows_) + ")");
  return logits_.data() + static_cast<std::size_t>(i) * m_.hparams().n_vocab;
}

const float* Window::final_streams(int r) const {
  if (r < 0 || r >= last_rows_)
    throw_error(ErrorKind::Value, "Window::final_streams: row " + std::to_string(r) + " is not in the last run (" +
                                      std::to_string(last_rows_) + " rows)");
  const model::HParams& hp = m_.hparams();
  return streams_.data() + static_cast<std::size_t>(r) * hp.hc_count * hp.n_embd;
}

void Window::commit(int64_t n) {
  if (n < n_committed_ || n > n_past_)
    throw_error(ErrorKind::Value, "commit(" + std::to_string(n) + "): must be in [n_committed = " +
                                      std::to_string(n_committed_) + ", n_past = " + std::to_string(n_past_) + "]");
  n_past_ = n;
  n_committed_ = n;
}

void Window::rollback(int64_t n) {
  if (n < 0 || n > n_past_)
    throw_error(ErrorKind::Value,
                "rollback(" + std::to_string(n) + "): must be in [0, n_past = " + std::to_string(n_past_) + "]");
  n_past_ = n;
  n_committed_ = std::min(n_committed_, n);
}

void Window::restore(const Checkpoint& cp) {
  if (cp.n_past < 0 || cp.n_past > max_ctx_ || cp.n_committed < 0 || cp.n_committed > cp.n_past || cp.stamp > stamp_)
    throw_error(ErrorKind::Value, "restore: the checkpoint does not belong to this window");
  for (int64_t c = 0; c < cp.n_past; ++c)
    if (cell_stamp_[static_cast<std::size_t>(c)] > cp.stamp)
      throw_error(ErrorKind::Value, "restore: cell " + std::to_string(c) +
                                        " was rewritten after the checkpoint was taken (the checkpoint is stale)");
  n_past_ = cp.n_past;
  n_committed_ = cp.n_committed;
  last_rows_ = 0;
  last_logit_rows_ = 0;
}

}  // namespace strata::engine
