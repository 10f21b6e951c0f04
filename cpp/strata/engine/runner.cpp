#include "strata/engine/runner.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::engine {

Runner::Runner(std::unique_ptr<model::Model> model, const RunnerConfig& cfg)
    : model_(std::move(model)), cfg_(cfg), encode_allowed_(cfg.encode_mtp) {
  if (!model_) throw_error(ErrorKind::Value, "Runner: no model");
  if (cfg.n_threads < 0 || cfg.n_threads > 1024)
    throw_error(ErrorKind::Value, "Runner: n_threads = " + std::to_string(cfg.n_threads) + " must be in [0, 1024]");
  ThreadPool* pool = &ThreadPool::global();
  if (cfg.n_threads > 0) {
    own_pool_ = std::make_unique<ThreadPool>(cfg.n_threads);
    pool = own_pool_.get();
  }
  const model::HParams& hp = model_->hparams();
  // before anything takes views of the drafter weights.
  model::requant_drafter(*model_, cfg.mtp_requant, pool);
  experts_ = std::make_unique<experts::ExpertStore>(experts::expert_layout(*model_), cfg.experts);
  WindowConfig wc;
  wc.max_ctx = cfg.max_ctx;
  wc.max_rows = cfg.max_rows;
  wc.pool = pool;
  wc.experts = experts_.get();
  wc.moce = cfg.moce;
  const bool with_mtp = model_->mtp.has_value();
  if (with_mtp) {
    if (cfg.mtp_sink < 0 || cfg.mtp_sink > 1024 || cfg.mtp_window < 1 || cfg.mtp_window > 2051)
      throw_error(ErrorKind::Value, "Runner: drafter sink " + std::to_string(cfg.mtp_sink) + " / window " +
                                        std::to_string(cfg.mtp_window) + " must be in [0, 1024] / [1, 2051]");
    cells_ = draft::DraftCells(static_cast<int>(cfg.mtp_sink), static_cast<int>(cfg.mtp_window));
    const int64_t ctx = cfg.max_ctx > 0 ? cfg.max_ctx : std::min<int64_t>(hp.context_length, 32768);
    // The Mtp's own policy in the cell_select convention (sinks + (p - W', p]) with W' = W + 1 is the
    // draft row's list when the run covers the window; lists hold sink + W' + 1 entries at most.
    wc.extra_list = std::min(ctx, cfg.mtp_sink + cfg.mtp_window + 2);
  }
  window_ = std::make_unique<Window>(*model_, wc);
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  carry_.resize(nd);
  if (with_mtp) {
    MtpConfig mc;
    mc.sink = cfg.mtp_sink;
    mc.window = cfg.mtp_window + 1;
    mc.max_ctx = window_->max_ctx();
    mc.max_rows = cfg.max_rows;
    mc.pool = pool;
    mc.experts = experts_.get();
    mc.expert_layer = static_cast<int>(hp.n_layer);  // expert_layout puts the MTP block after the main layers
    mtp_ = std::make_unique<Mtp>(*model_, mc, &window_->scratch());
    mtp_in_.resize(static_cast<std::size_t>(cfg.max_rows) * nd);
    mtp_tok_.resize(static_cast<std::size_t>(cfg.max_rows));
    mtp_valid_.resize(static_cast<std::size_t>(window_->max_ctx()));
    mtp_stamp_.resize(static_cast<std::size_t>(window_->max_ctx()));
    mtp_next_.resize(static_cast<std::size_t>(window_->max_ctx()));
    std::memset(mtp_valid_.data(), 0, mtp_valid_.size());
    std::fill(mtp_next_.data(), mtp_next_.data() + mtp_next_.size(), -1);
    std::memset(mtp_stamp_.data(), 0, mtp_stamp_.size() * sizeof(uint64_t));
    list_.reserve(static_cast<std::size_t>(cells_.max_row_cells()));
  }
}

Runner::~Runner() = default;

Mtp& Runner::mtp() {
  if (!mtp_) throw_error(ErrorKind::Value, "this model has no MTP layer (nextn_predict_layers = 0)");
  return *mtp_;
}

const float* Runner::streams_at(int64_t p) const {
  const Window& w = *window_;
  if (p >= 0 && p < w.n_past() && w.rows() > 0 && p >= w.rows_start() && p < w.rows_start() + w.rows())
    return w.final_streams(static_cast<int>(p - w.rows_start()));
  if (p >= 0 && p == carry_pos_ && p < w.n_past()) return carry_.data();
  return nullptr;
}

void Runner::mtp_wrote(int64_t c0, int64_t n, const int32_t* next_tokens) {
  ++mtp_clock_;
  for (int64_t c = c0; c < c0 + n; ++c) {
    mtp_valid_[static_cast<std::size_t>(c)] = 1;
    mtp_stamp_[static_cast<std::size_t>(c)] = mtp_clock_;
    mtp_next_[static_cast<std::size_t>(c)] = next_tokens[c - c0];
  }
  const std::size_t from = static_cast<std::size_t>(c0 + n);
  if (from < mtp_valid_.size()) std::memset(mtp_valid_.data() + from, 0, mtp_valid_.size() - from);
}

void Runner::ledger_invalidate(int64_t from) {
  const std::size_t f = static_cast<std::size_t>(std::max<int64_t>(from, 0));
  if (f < mtp_valid_.size()) std::memset(mtp_valid_.data() + f, 0, mtp_valid_.size() - f);
}

bool Runner::mtp_cell_valid(int64_t c) const {
  return mtp_ && c >= 0 && c < static_cast<int64_t>(mtp_valid_.size()) && mtp_valid_[static_cast<std::size_t>(c)] != 0 &&
         cells_.valid(static_cast<int32_t>(c));
}

void Runner::encode_mtp_rows(const int32_t* tokens, int64_t chunk_start, int rows) {
  // Rows q = chunk_start-1 .. chunk_start+rows-2: streams of q with token q+1.
  const model::HParams& hp = model_->hparams();
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  int m = 0;
  int64_t q0 = chunk_start;
  if (chunk_start > 0) {
    if (carry_pos_ == chunk_start - 1) {
      std::memcpy(mtp_in_.data(), carry_.data(), nd * sizeof(float));
      mtp_tok_[0] = tokens[0];
      m = 1;
      q0 = chunk_start - 1;
    } else if (mtp_next_[static_cast<std::size_t>(chunk_start - 1)] != tokens[0]) {
      mtp_valid_[static_cast<std::size_t>(chunk_start - 1)] = 0;  // its next token changed; cannot re-encode
      cells_.wrote(static_cast<int32_t>(chunk_start - 1), 0);
    }
  }
  for (int r = 0; r + 1 < rows; ++r) {
    std::memcpy(mtp_in_.data() + static_cast<std::size_t>(m) * nd, window_->final_streams(r), nd * sizeof(float));
    mtp_tok_[static_cast<std::size_t>(m)] = tokens[r + 1];
    ++m;
  }
  if (m > 0) {
    mtp_->encode(mtp_in_.data(), mtp_tok_.data(), m, q0);
    mtp_wrote(q0, m, mtp_tok_.data());
    cells_.wrote(static_cast<int32_t>(q0), m);
  } else {
    // Nothing encoded, but cells from the chunk on hold no valid MTP K/V for this sequence (cell
    // chunk_start-1 was settled above by its next token).
    ledger_invalidate(chunk_start);
    cells_.wrote(static_cast<int32_t>(chunk_start), 0);
  }
}

void Runner::eval(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out,
                  int64_t draft_from_row) {
  Window& w = *window_;
  const model::HParams& hp = model_->hparams();
  if (n < 1) throw_error(ErrorKind::Value, "eval: no tokens");
  if (start < 0 || start > w.n_past())
    throw_error(ErrorKind::Value, "eval: start " + std::to_string(start) + " is beyond n_past = " + std::to_string(w.n_past()));
  if (start + n > w.max_ctx())
    throw_error(ErrorKind::Value, "eval: positions up to " + std::to_string(start + n) + " exceed the context of " +
                                      std::to_string(w.max_ctx()) + " cells");
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= hp.n_vocab)
      throw_error(ErrorKind::Value, "eval: token " + std::to_string(tokens[i]) + " is outside the vocabulary of " +
                                        std::to_string(hp.n_vocab));
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  const std::size_t V = hp.n_vocab;
  chain_pos_ = -1;  // a pass of the main model ends any draft chain
  if (mtp_) cells_.wrote(static_cast<int32_t>(start), 0);  // R-9 protocol: cells from start are stale
  // The streams of start-1: the MTP row that the first token completes.
  if (const float* prev = start > 0 ? streams_at(start - 1) : nullptr) {
    if (prev != carry_.data()) std::memcpy(carry_.data(), prev, nd * sizeof(float));
    carry_pos_ = start - 1;
  } else {
    carry_pos_ = -1;
  }
  // After each chunk, while its final streams are readable: encode its MTP rows, then carry its
  // last row's streams into the next chunk.
  auto after_chunk = [&](int64_t pos, int rows) {
    const int32_t* chunk_tokens = tokens + (pos - start);
    if (mtp_ && cfg_.encode_mtp) {
      encode_mtp_rows(chunk_tokens, pos, rows);
    } else if (mtp_) {
      ledger_invalidate(pos - 1);
      cells_.wrote(static_cast<int32_t>(std::max<int64_t>(pos - 1, 0)), 0);
    }
    std::memcpy(carry_.data(), w.final_streams(rows - 1), nd * sizeof(float));
    carry_pos_ = pos + rows - 1;
  };
  if (which != LogitRows::All && draft_from_row < 0) {
    // One reference captured: std::function keeps it inline (no allocation per eval).
    auto on_chunk = [&after_chunk](int64_t pos, int rows) { after_chunk(pos, rows); };
    w.prompt_run_rows(tokens, n, start, on_chunk, w.max_rows(), which == LogitRows::Last);
    if (logits_out && which == LogitRows::Last) std::memcpy(logits_out, w.logits(0), V * sizeof(float));
    return;
  }
  const int chunk = which == LogitRows::All ? std::min(w.max_rows(), w.max_logit_rows()) : w.max_rows();
  for (int64_t off = 0; off < n; off += chunk) {
    const int rows = static_cast<int>(std::min<int64_t>(chunk, n - off));
    const bool last = off + rows == n;
    const LogitRows rw = which == LogitRows::All ? LogitRows::All : (last ? which : LogitRows::None);
    // The chunk's own row index of the first draft row (rows past the chunk: none of it is draft).
    int chunk_draft = -1;
    if (draft_from_row >= 0 && draft_from_row < off + rows)
      chunk_draft = static_cast<int>(std::max<int64_t>(draft_from_row - off, 0));
    w.run(tokens + off, rows, start + off, rw, chunk_draft);
    if (logits_out && which == LogitRows::All)
      for (int r = 0; r < rows; ++r)
        std::memcpy(logits_out + static_cast<std::size_t>(off + r) * V, w.logits(r), V * sizeof(float));
    if (logits_out && which == LogitRows::Last && last) std::memcpy(logits_out, w.logits(0), V * sizeof(float));
    after_chunk(start + off, rows);
  }
}

void Runner::commit(int64_t n) {
  window_->commit(n);
  chain_pos_ = -1;
  if (mtp_ && n >= 1) {
    ledger_invalidate(n - 1);
    cells_.wrote(static_cast<int32_t>(n - 1), 0);
  }
}

void Runner::rollback(int64_t n) {
  window_->rollback(n);
  chain_pos_ = -1;
  if (mtp_) {
    // Cell n-1 keeps its flag: the next eval at n re-encodes it (streams held) or keeps it only when
    // it feeds the same token at n (encode_mtp_rows); a draft round from n-1 rewrites it.
    ledger_invalidate(n);
    if (n == 0)
      cells_.reset();
    else
      cells_.wrote(static_cast<int32_t>(n), 0);
  }
  if (carry_pos_ >= n) carry_pos_ = -1;
}

void Runner::restore(const RunnerCheckpoint& cp) {
  window_->restore(cp.window);
  chain_pos_ = -1;
  if (mtp_) {
    // The checkpoint's sink and run, cut at the first cell written since and at n_past - 1.
    // The ledger: a cell holds committed K/V again if it did at the checkpoint and was not rewritten
    // since (the stamps are what was actually written).
    int64_t cut = std::max<int64_t>(cp.window.n_past - 1, 0);
    for (std::size_t c = 0; c < mtp_valid_.size(); ++c)
      if (mtp_stamp_[c] > cp.mtp_clock) cut = std::min(cut, static_cast<int64_t>(c));
    cells_ = cp.cells;
    cells_.wrote(static_cast<int32_t>(cut), 0);
    for (std::size_t c = 0; c < mtp_valid_.size(); ++c)
      mtp_valid_[c] = cells_.valid(static_cast<int32_t>(c)) && mtp_stamp_[c] <= cp.mtp_clock ? 1 : 0;
  }
  carry_pos_ = -1;
}

void Runner::check_ledger(int64_t pos, int chain_step) const {
  // Every listed cell holds committed drafter K/V, except the row's own cell (it writes it) and, for
  // chain steps, this chain's speculative cells (chain_pos_, pos).
  for (const int32_t c : list_) {
    if (c == pos || (chain_step > 0 && c > chain_pos_)) continue;
    if (mtp_valid_[static_cast<std::size_t>(c)] == 0)
      throw_error(ErrorKind::Internal, "drafter row at cell " + std::to_string(pos) + " (chain step " +
                                           std::to_string(chain_step) + ") would read cell " + std::to_string(c) +
                                           ", which holds no committed drafter K/V (R-9)");
  }
}

void Runner::draft_begin_from(const float* H, int64_t p, int32_t next_token) {
  mtp();
  const model::HParams& hp = model_->hparams();
  if (p < 0 || p >= window_->n_past())
    throw_error(ErrorKind::Value, "draft: position " + std::to_string(p) + " is not an evaluated position (n_past = " +
                                      std::to_string(window_->n_past()) + ")");
  if (next_token < 0 || static_cast<uint32_t>(next_token) >= hp.n_vocab)
    throw_error(ErrorKind::Value, "draft: token " + std::to_string(next_token) + " is outside the vocabulary");
  if (!H) {
    H = streams_at(p);
    if (!H)
      throw_error(ErrorKind::Value, "draft: the final streams of position " + std::to_string(p) +
                                        " are no longer held (evaluate it again)");
  }
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  std::memcpy(mtp_in_.data(), H, nd * sizeof(float));
  chain_pos_ = p;
  chain_step_ = 0;
  chain_token_ = next_token;
}

int32_t Runner::draft_step(float* logits_out) {
  Mtp& m = mtp();
  if (chain_pos_ < 0) throw_error(ErrorKind::Value, "draft_step: no draft chain (call draft_begin first)");
  const int64_t pos = chain_pos_ + chain_step_;
  if (pos >= window_->max_ctx())
    throw_error(ErrorKind::Value, "draft_step: cell " + std::to_string(pos) + " is outside the context");
  const int32_t t = chain_token_;
  if (chain_step_ == 0) {
    // The committed row: its K/V come from the main model's streams at pos and token t_{pos+1}.
    cells_.wrote(static_cast<int32_t>(pos), 1);
    mtp_wrote(pos, 1, &t);
  }
  const int n = cells_.draft_row_cells(static_cast<int32_t>(pos), list_);
  cells_.check_reads(list_, static_cast<int32_t>(pos), chain_step_);
  check_ledger(pos, chain_step_);
  if (chain_step_ > 0) {
    // A speculative cell: stamped (a restore must drop it), never committed.
    ++mtp_clock_;
    mtp_stamp_[static_cast<std::size_t>(pos)] = mtp_clock_;
    ledger_invalidate(pos);
  }
  m.run_row(mtp_in_.data(), t, pos, list_.data(), n, true);
  const std::size_t Vr = model_->hparams().mtp_vocab;
  if (logits_out) std::memcpy(logits_out, m.draft_logits(0), Vr * sizeof(float));
  const int32_t d = m.draft_token(0);
  const model::HParams& hp = model_->hparams();
  std::memcpy(mtp_in_.data(), m.out_streams(0), static_cast<std::size_t>(hp.hc_count) * hp.n_embd * sizeof(float));
  chain_token_ = d;
  ++chain_step_;
  return d;
}

void Runner::mtp_draft(const float* H, int32_t next_token, int64_t p, int n_steps, float* logits_out,
                       int32_t* tokens_out) {
  if (n_steps < 1) throw_error(ErrorKind::Value, "mtp_draft: n_steps must be >= 1");
  if (p < 0 || p + n_steps > window_->max_ctx())
    throw_error(ErrorKind::Value, "mtp_draft: positions " + std::to_string(p) + ".." + std::to_string(p + n_steps - 1) +
                                      " are outside the context");
  draft_begin_from(H, p, next_token);
  const std::size_t Vr = model_->hparams().mtp_vocab;
  for (int j = 0; j < n_steps; ++j)
    tokens_out[j] = draft_step(logits_out ? logits_out + static_cast<std::size_t>(j) * Vr : nullptr);
}

}  // namespace strata::engine
