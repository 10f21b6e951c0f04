#include "strata/engine/sequence.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/util/error.h"

namespace strata::engine {

Sequence::Sequence(std::unique_ptr<SequenceBackend> backend, const SequenceConfig& cfg)
    : backend_(std::move(backend)), cfg_(cfg), encode_allowed_(cfg.encode_mtp) {
  if (!backend_) throw_error(ErrorKind::Value, "sequence: no backend");
  const model::HParams& hp = backend_->hparams();
  const std::size_t ctx = static_cast<std::size_t>(backend_->max_ctx());
  nd_ = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  carry_.resize(nd_);
  cell_stamp_.assign(ctx, 0);
  ledger_ = CellLedger(backend_->max_ctx());
  if (backend_->has_drafter()) {
    if (cfg.mtp_sink < 0 || cfg.mtp_sink > 1024 || cfg.mtp_window < 1 || cfg.mtp_window > 2051)
      throw_error(ErrorKind::Value, "sequence: drafter sink " + std::to_string(cfg.mtp_sink) + " / window " +
                                        std::to_string(cfg.mtp_window) + " must be in [0, 1024] / [1, 2051]");
    cells_ = draft::DraftCells(static_cast<int>(cfg.mtp_sink), static_cast<int>(cfg.mtp_window));
    mtp_next_.assign(ctx, -1);
    mtp_stamp_.assign(ctx, 0);
    const std::size_t rows = static_cast<std::size_t>(std::max(backend_->max_rows(), 1));
    mtp_in_.resize(rows * nd_);
    mtp_tok_.resize(rows);
    list_.reserve(static_cast<std::size_t>(cells_.max_row_cells()));
    if (encode_allowed_) {
      pend_in_.resize(static_cast<std::size_t>(kPendingRows) * nd_);
      pend_tok_.assign(kPendingRows, -1);
      pend_stamp_.assign(2 * static_cast<std::size_t>(kPendingRows), 0);
    }
  }
}

Sequence::~Sequence() = default;

const float* Sequence::streams_at(int64_t p) const {
  if (p < 0 || p >= n_past_) return nullptr;
  if (last_rows_ > 0 && p >= last_start_ && p < last_start_ + last_rows_)
    return backend_->row_streams(static_cast<int>(p - last_start_));
  if (p == carry_pos_) return carry_.data();
  return nullptr;
}

bool Sequence::mtp_cell_valid(int64_t c) const {
  return has_drafter() && c >= 0 && c < max_ctx() && cells_.valid(static_cast<int32_t>(c));
}

void Sequence::check_eval_args(const int32_t* tokens, int64_t n, int64_t start, LogitRows which,
                               const float* logits_out) const {
  if (n < 1) throw_error(ErrorKind::Value, "eval: no tokens");
  if (start < 0 || start > n_past_)
    throw_error(ErrorKind::Value,
                "eval: start " + std::to_string(start) + " is beyond n_past = " + std::to_string(n_past_));
  if (start + n > max_ctx())
    throw_error(ErrorKind::Value, "eval: positions up to " + std::to_string(start + n) + " exceed the context of " +
                                      std::to_string(max_ctx()) + " cells");
  const int64_t V = n_vocab();
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      throw_error(ErrorKind::Value,
                  "eval: token " + std::to_string(tokens[i]) + " is outside the vocabulary of " + std::to_string(V));
  if (which == LogitRows::All && logits_out == nullptr)
    throw_error(ErrorKind::Value, "eval: every row's logits requested without an output buffer");
}

void Sequence::drafter_wrote(int64_t q0, int m, const int32_t* next_tokens) {
  ++mtp_clock_;
  for (int r = 0; r < m; ++r) {
    const std::size_t c = static_cast<std::size_t>(q0 + r);
    mtp_next_[c] = next_tokens[r];
    mtp_stamp_[c] = mtp_clock_;
    ledger_.drafter_committed(q0 + r, next_tokens[r]);
  }
  cells_.wrote(static_cast<int32_t>(q0), m);
}

void Sequence::keep_pending(int64_t q, const float* streams, int32_t next_token) {
  if (q < pend_begin_ || q > pend_end_) pend_begin_ = q;  // not next to the kept run: start over
  pend_end_ = q;                                          // rows from q on are replaced
  const auto slot = static_cast<std::size_t>(q % kPendingRows);
  std::memcpy(pend_in_.data() + slot * nd_, streams, nd_ * sizeof(float));
  pend_tok_[slot] = next_token;
  pend_stamp_[2 * slot] = cell_stamp_[static_cast<std::size_t>(q)];
  pend_stamp_[2 * slot + 1] = cell_stamp_[static_cast<std::size_t>(q + 1)];
  pend_end_ = q + 1;
  pend_begin_ = std::max(pend_begin_, pend_end_ - kPendingRows);
}

int Sequence::pending_before(int64_t q_end, int cap) const {
  if (pend_tok_.empty() || q_end <= pend_begin_ || q_end > pend_end_ || q_end >= n_past_) return 0;
  int count = 0;
  for (int64_t q = q_end - 1; q >= pend_begin_ && count < cap; --q, ++count) {
    const auto slot = static_cast<std::size_t>(q % kPendingRows);
    // Rows whose cells were rewritten since were computed from other tokens; a cell already valid with
    // this next token needs nothing (and the rows before it were encoded with it).
    if (pend_stamp_[2 * slot] != cell_stamp_[static_cast<std::size_t>(q)] ||
        pend_stamp_[2 * slot + 1] != cell_stamp_[static_cast<std::size_t>(q + 1)] ||
        (cells_.valid(static_cast<int32_t>(q)) && mtp_next_[static_cast<std::size_t>(q)] == pend_tok_[slot]))
      break;
  }
  return count;
}

void Sequence::copy_pending(int64_t q_end, int count) {
  for (int i = 0; i < count; ++i) {
    const int64_t q = q_end - count + i;
    const auto slot = static_cast<std::size_t>(q % kPendingRows);
    std::memcpy(mtp_in_.data() + static_cast<std::size_t>(i) * nd_, pend_in_.data() + slot * nd_, nd_ * sizeof(float));
    mtp_tok_[static_cast<std::size_t>(i)] = pend_tok_[slot];
  }
  pend_begin_ = pend_end_ = 0;  // encoded (or older than what is): nothing kept
}

int Sequence::encode_pending(int64_t p) {
  const int m = pending_before(p, std::min(kPendingRows, max_rows()));
  if (m == 0) return 0;
  end_chain();
  copy_pending(p, m);
  backend_->draft_encode(mtp_in_.data(), mtp_tok_.data(), m, p - m);
  rows_encoded_ += m;
  drafter_wrote(p - m, m, mtp_tok_.data());
  return m;
}

void Sequence::encode_rows(const int32_t* tokens, int64_t chunk_start, int rows) {
  // Rows q = chunk_start-1 .. chunk_start+rows-2: streams of q with token q+1, after any rows kept
  // while encoding was off that end just before them (one batch).
  int m = 0;
  int64_t q0 = chunk_start;
  if (chunk_start > 0) {
    const auto prev = static_cast<std::size_t>(chunk_start - 1);
    // Valid with the token fed now: e.g. written by a round's first draft step, whose window starts
    // here (encoding it again cost ~4 % of a 2-row window's instructions).
    const bool held = cells_.valid(static_cast<int32_t>(chunk_start - 1)) && mtp_next_[prev] == tokens[0];
    if (!held && carry_pos_ == chunk_start - 1) {
      m = pending_before(chunk_start - 1, std::min(kPendingRows, max_rows() - rows));
      q0 = chunk_start - 1 - m;
      copy_pending(chunk_start - 1, m);
      std::memcpy(mtp_in_.data() + static_cast<std::size_t>(m) * nd_, carry_.data(), nd_ * sizeof(float));
      mtp_tok_[static_cast<std::size_t>(m)] = tokens[0];
      ++m;
    } else if (mtp_next_[prev] != tokens[0]) {
      cells_.wrote(static_cast<int32_t>(chunk_start - 1), 0);  // its next token changed; cannot re-encode
    }
  }
  pend_begin_ = pend_end_ = 0;
  for (int r = 0; r + 1 < rows; ++r) {
    std::memcpy(mtp_in_.data() + static_cast<std::size_t>(m) * nd_, backend_->row_streams(r), nd_ * sizeof(float));
    mtp_tok_[static_cast<std::size_t>(m)] = tokens[r + 1];
    ++m;
  }
  if (m == 0) return;  // cells from the chunk on were marked stale when the eval began
  backend_->draft_encode(mtp_in_.data(), mtp_tok_.data(), m, q0);
  rows_encoded_ += m;
  drafter_wrote(q0, m, mtp_tok_.data());
}

int64_t Sequence::eval_rows(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out,
                            int64_t draft_from_row, int64_t cut_from_row) {
  check_eval_args(tokens, n, start, which, logits_out);
  end_chain();  // a pass of the main model ends any draft chain
  const bool drafter = has_drafter();
  if (drafter) cells_.wrote(static_cast<int32_t>(start), 0);  // DraftCells protocol: cells from start are stale
  // The streams of start-1: the drafter row the first token completes.
  if (const float* prev = start > 0 ? streams_at(start - 1) : nullptr) {
    if (prev != carry_.data()) std::memcpy(carry_.data(), prev, nd_ * sizeof(float));
    carry_pos_ = start - 1;
  } else {
    carry_pos_ = -1;
  }
  n_committed_ = std::min(n_committed_, start);
  ++stamp_;
  const std::size_t V = static_cast<std::size_t>(n_vocab());
  const int chunk =
      which == LogitRows::All ? std::min(backend_->max_rows(), backend_->max_logit_rows()) : backend_->max_rows();
  for (int64_t off = 0; off < n; off += chunk) {
    const int rows = static_cast<int>(std::min<int64_t>(chunk, n - off));
    const bool last = off + rows == n;
    const int64_t pos = start + off;
    float* out = nullptr;
    if (which == LogitRows::All)
      out = logits_out + static_cast<std::size_t>(off) * V;
    else if (which == LogitRows::Last && last)
      out = logits_out;
    const LogitRows rw = out == nullptr ? LogitRows::None : which;
    // The chunk's own row index of the first draft row (rows past the chunk: none of it is draft).
    int chunk_draft = -1;
    if (draft_from_row >= 0 && draft_from_row < off + rows)
      chunk_draft = static_cast<int>(std::max<int64_t>(draft_from_row - off, 0));
    // Before the run: a failed chunk leaves its cells stamped and outside the sequence.
    last_rows_ = 0;
    n_past_ = pos;
    for (int r = 0; r < rows; ++r) {
      cell_stamp_[static_cast<std::size_t>(pos + r)] = stamp_;
      ledger_.main_wrote(pos + r, tokens[off + r]);
    }
    // A cut window (one chunk, every row's logits) keeps its first `ran` rows: the rest are as if never run.
    int ran = rows;
    if (cut_from_row >= 1 && off == 0 && last && which == LogitRows::All)
      ran = backend_->run_window(tokens, rows, pos, out, chunk_draft, static_cast<int>(cut_from_row));
    else
      backend_->run_rows(tokens + off, rows, pos, rw, out, chunk_draft);
    last_start_ = pos;
    last_rows_ = ran;
    n_past_ = pos + ran;
    // While the chunk's final streams are held: the drafter's rows, then the carry of its last row.
    if (drafter && cfg_.encode_mtp) {
      encode_rows(tokens + off, pos, ran);
    } else if (drafter) {
      cells_.wrote(static_cast<int32_t>(std::max<int64_t>(pos - 1, 0)), 0);
      if (!pend_tok_.empty()) {  // encoding is off for now: keep the last rows for a later batch
        if (pos > 0 && carry_pos_ == pos - 1 && ran <= kPendingRows) keep_pending(pos - 1, carry_.data(), tokens[off]);
        for (int r = std::max(0, ran - 1 - kPendingRows); r + 1 < ran; ++r)
          keep_pending(pos + r, backend_->row_streams(r), tokens[off + r + 1]);
      }
    }
    std::memcpy(carry_.data(), backend_->row_streams(ran - 1), nd_ * sizeof(float));
    carry_pos_ = pos + ran - 1;
    if (ran < rows) return off + ran;
  }
  return n;
}

void Sequence::rollback(int64_t n) {
  if (n < 0 || n > n_past_)
    throw_error(ErrorKind::Value,
                "rollback(" + std::to_string(n) + "): must be in [0, n_past = " + std::to_string(n_past_) + "]");
  end_chain();
  n_past_ = n;
  n_committed_ = std::min(n_committed_, n);
  backend_->set_length(n);
  // Drafter cells from n on are stale; cell n-1 stays valid only if the next eval feeds at n the token
  // it was encoded with (encode_rows), or a draft from n-1 rewrites it.
  if (has_drafter()) {
    if (n == 0)
      cells_.reset();
    else
      cells_.wrote(static_cast<int32_t>(n), 0);
  }
  if (carry_pos_ >= n) carry_pos_ = -1;
}

void Sequence::commit(int64_t n) {
  if (n < n_committed_ || n > n_past_)
    throw_error(ErrorKind::Value, "commit(" + std::to_string(n) + "): must be in [n_committed = " +
                                      std::to_string(n_committed_) + ", n_past = " + std::to_string(n_past_) + "]");
  end_chain();
  n_past_ = n;
  n_committed_ = n;
  backend_->set_length(n);
  // Drafter cell n-1 was encoded with a next token the sequence no longer holds.
  if (has_drafter()) {
    if (n == 0)
      cells_.reset();
    else
      cells_.wrote(static_cast<int32_t>(n - 1), 0);
  }
  if (carry_pos_ >= n) carry_pos_ = -1;
}

SequenceCheckpoint Sequence::checkpoint() const {
  SequenceCheckpoint cp;
  cp.n_past = n_past_;
  cp.n_committed = n_committed_;
  cp.stamp = stamp_;
  cp.mtp_clock = mtp_clock_;
  cp.cells = cells_;
  cp.owner = this;
  return cp;
}

void Sequence::restore(const SequenceCheckpoint& cp) {
  if (cp.owner != this || cp.n_past < 0 || cp.n_past > max_ctx() || cp.n_committed < 0 || cp.n_committed > cp.n_past ||
      cp.stamp > stamp_ || cp.mtp_clock > mtp_clock_)
    throw_error(ErrorKind::Value, "restore: the checkpoint does not belong to this sequence");
  for (int64_t c = 0; c < cp.n_past; ++c)
    if (cell_stamp_[static_cast<std::size_t>(c)] > cp.stamp)
      throw_error(ErrorKind::Value, "restore: cell " + std::to_string(c) +
                                        " was rewritten after the checkpoint was taken (the checkpoint is stale)");
  end_chain();
  n_past_ = cp.n_past;
  n_committed_ = cp.n_committed;
  backend_->set_length(n_past_);
  last_rows_ = 0;
  carry_pos_ = -1;
  pend_begin_ = pend_end_ = 0;
  if (has_drafter()) {
    // The checkpoint's sink and run, cut at n_past - 1 (its next token is unknown again) and at the
    // first drafter cell written since (chain cells of later rounds, re-encodings after rollbacks).
    int64_t cut = std::max<int64_t>(cp.n_past - 1, 0);
    for (int64_t c = 0; c < cut; ++c)
      if (mtp_stamp_[static_cast<std::size_t>(c)] > cp.mtp_clock) {
        cut = c;
        break;
      }
    cells_ = cp.cells;
    cells_.wrote(static_cast<int32_t>(cut), 0);
  }
}

void Sequence::draft_begin_from(const float* H, int64_t p, int32_t next_token) {
  if (!has_drafter()) throw_error(ErrorKind::Value, "this model has no MTP layer (nextn_predict_layers = 0)");
  if (p < 0 || p >= n_past_)
    throw_error(ErrorKind::Value, "draft: position " + std::to_string(p) +
                                      " is not an evaluated position (n_past = " + std::to_string(n_past_) + ")");
  if (next_token < 0 || next_token >= n_vocab())
    throw_error(ErrorKind::Value, "draft: token " + std::to_string(next_token) + " is outside the vocabulary");
  // Rows deferred while encoding was off, up to p - 1 (step 0 writes cell p); this ends no chain
  // of the caller's, as draft_begin starts a new one anyway.
  if (!H) encode_pending(p);
  if (!H) {
    H = streams_at(p);
    if (!H)
      throw_error(ErrorKind::Value, "draft: the final streams of position " + std::to_string(p) +
                                        " are not held (only the rows of the last eval are; evaluate it again)");
  }
  std::memcpy(mtp_in_.data(), H, nd_ * sizeof(float));
  chain_ = CellLedger::Chain{p, next_token, ++rounds_};
  chain_step_ = 0;
  chain_token_ = next_token;
}

void Sequence::set_draft_token(int32_t token) {
  if (chain_.p < 0 || chain_step_ == 0)
    throw_error(ErrorKind::Value, "set_draft_token: no draft step to replace the token of (draft_step first)");
  if (token < 0 || token >= n_vocab())
    throw_error(ErrorKind::Value, "set_draft_token: token " + std::to_string(token) + " is outside the vocabulary");
  chain_token_ = token;
}

int32_t Sequence::draft_step(float* logits_out) {
  if (!has_drafter() || chain_.p < 0)
    throw_error(ErrorKind::Value,
                "draft_step: no draft chain (draft_begin first; an eval, rollback or restore ends it)");
  const int64_t pos = chain_.p + chain_step_;
  if (pos >= max_ctx())
    throw_error(ErrorKind::Value, "draft_step: cell " + std::to_string(pos) + " is outside the context");
  if (chain_step_ == 0) {
    // The committed row: its K/V come from the main model's streams at p and token t_{p+1}.
    drafter_wrote(chain_.p, 1, &chain_.next);
  } else {
    // A speculative chain cell: stamped (a restore must drop it), never reported to DraftCells.
    const std::size_t c = static_cast<std::size_t>(pos);
    ++mtp_clock_;
    mtp_next_[c] = -1;
    mtp_stamp_[c] = mtp_clock_;
    ledger_.drafter_chain(pos, chain_.round);
  }
  // The row's cells: exactly DraftCells' list, checked by the bookkeeping and by the ground truth.
  const int32_t pos32 = static_cast<int32_t>(pos);
  cells_.draft_row_cells(pos32, list_);
  cells_.check_reads(list_, pos32, chain_step_);
  ledger_.check_draft_row(list_, pos, chain_, n_past_);
  const int32_t d =
      backend_->draft_row(mtp_in_.data(), chain_token_, pos, list_, logits_out, mtp_in_.data(), chain_step_ > 0);
  chain_token_ = d;
  ++chain_step_;
  return d;
}

void Sequence::mtp_draft(const float* H, int32_t next_token, int64_t p, int n_steps, float* logits_out,
                         int32_t* tokens_out) {
  if (n_steps < 1) throw_error(ErrorKind::Value, "mtp_draft: n_steps must be >= 1");
  if (p < 0 || p + n_steps > max_ctx())
    throw_error(ErrorKind::Value, "mtp_draft: positions " + std::to_string(p) + ".." + std::to_string(p + n_steps - 1) +
                                      " are outside the context");
  draft_begin_from(H, p, next_token);
  const std::size_t Vr = static_cast<std::size_t>(draft_vocab());
  for (int j = 0; j < n_steps; ++j)
    tokens_out[j] = draft_step(logits_out ? logits_out + static_cast<std::size_t>(j) * Vr : nullptr);
}

bool Sequence::drafter_cell_lost(int64_t keep, int64_t n_target, bool changed) const {
  // Drafter cell keep-1 comes from the main streams at keep-1 and the token at keep: kept while that
  // token stays, re-encoded by the eval from keep while the streams are held. A hole matters when it
  // lies in the sink or in the window of a position still to come.
  if (keep == 0 || (mtp_cell_valid(keep - 1) && !changed)) return false;
  if (streams_at(keep - 1) != nullptr) return false;
  const int64_t c = keep - 1;
  return c < cfg_.mtp_sink || c >= n_target - 1 - cfg_.mtp_window;
}

int64_t Sequence::reuse_prefix(std::span<const int32_t> held, std::span<const int32_t> target, bool drafting) const {
  if (target.empty()) throw_error(ErrorKind::Value, "reuse_prefix: nothing to evaluate (the target is empty)");
  std::size_t common = 0;
  while (common < held.size() && common < target.size() && held[common] == target[common]) ++common;
  const int64_t T = static_cast<int64_t>(target.size());
  const int64_t keep = std::min({static_cast<int64_t>(common), n_past_, T - 1});
  const std::size_t k = static_cast<std::size_t>(keep);
  const bool changed = k < held.size() && held[k] != target[k];
  if (!drafting || !has_drafter() || !drafter_cell_lost(keep, T, changed)) return keep;
  // One token more: row keep-1 encodes drafter cell keep-1 again with the new token at keep; cell
  // keep-2 stays valid since the token fed at keep-1 is the one it was encoded with.
  return drafter_cell_lost(keep - 1, T, false) ? 0 : keep - 1;
}

}  // namespace strata::engine
