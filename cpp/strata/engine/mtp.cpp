#include "strata/engine/mtp.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/repack.h"
#include "strata/engine/block.h"
#include "strata/engine/linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"
#include "strata/engine/vec_dot.h"
#include "strata/experts/expert_store.h"
#include "strata/model/drafter_requant.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::engine {
namespace {

int64_t mtp_ctx(const model::HParams& hp, int64_t asked) {
  if (asked > 0) return asked;
  return std::min<int64_t>(hp.context_length, 32768);
}

const model::Model& require_mtp(const model::Model& m) {
  if (!m.mtp) throw_error(ErrorKind::Value, "this model has no MTP layer (nextn_predict_layers = 0)");
  return m;
}

}  // namespace

Mtp::Mtp(const model::Model& m, const MtpConfig& cfg, Scratch* scratch)
    : m_(require_mtp(m)),
      pool_(cfg.pool ? cfg.pool : &ThreadPool::global()),
      experts_(cfg.experts),
      expert_layer_(cfg.expert_layer),
      resident_only_(cfg.resident_only),
      max_rows_(cfg.max_rows),
      max_logit_rows_(0),
      max_ctx_(mtp_ctx(m.hparams(), cfg.max_ctx)),
      policy_{cfg.sink, cfg.window, 0},
      kv_(1, m.ds4_mtp ? 1 : std::max<int64_t>(max_ctx_, 1), static_cast<int>(m.hparams().n_head_kv),
          static_cast<int>(m.hparams().head_dim), m.hparams().kv_type, 0),  // the main model's cell type
      rope_(static_cast<int>(m.hparams().rope_dim), m.hparams().rope_base),
      s_(scratch) {
  m.note_cells_built();
  const model::HParams& hp = m.hparams();
  if (cfg.sink < 0 || cfg.sink > 1024)
    throw_error(ErrorKind::Value, "MTP sink = " + std::to_string(cfg.sink) + " must be in [0, 1024]");
  if (cfg.window < 0 || cfg.window > 65536)
    throw_error(ErrorKind::Value, "MTP window = " + std::to_string(cfg.window) + " must be in [0, 65536]");
  if (max_rows_ < 1 || max_rows_ > 4096)
    throw_error(ErrorKind::Value, "MTP max_rows = " + std::to_string(max_rows_) + " must be in [1, 4096]");
  if (max_ctx_ <= 0 || max_ctx_ > 0x7FFFFFFF)
    throw_error(ErrorKind::Value, "MTP max_ctx = " + std::to_string(max_ctx_) + " must be in [1, 2^31)");
  // window 0: every causal cell, as an implicit list (no list buffer, scores up to max_ctx). Lists
  // hold sink + window + 1 entries: the drafter's own lists (run_row) include the row's cell.
  const int64_t list = policy_.window > 0 ? std::min(max_ctx_, policy_.sink + policy_.window + 1) : 1;
  const int64_t scores = policy_.window > 0 ? list : max_ctx_;
  if (s_) {
    if (s_->shape.max_rows < max_rows_ || s_->shape.max_list < list ||
        std::max(s_->shape.max_ctx, s_->shape.max_list) < scores || s_->shape.n_slots < parallel_slots_count(pool_))
      throw_error(ErrorKind::Value, "MTP: the shared scratch is too small (create the window with extra_list >= " +
                                        std::to_string(list) + ")");
  } else {
    ScratchShape shape;
    shape.max_rows = max_rows_;
    shape.max_ctx = scores;  // the MTP never scores indexer candidates: attention scores only
    shape.max_list = list;
    shape.n_slots = parallel_slots_count(pool_);
    own_scratch_ = std::make_unique<Scratch>(hp, shape);
    s_ = own_scratch_.get();
  }
  const int64_t Vr = hp.mtp_vocab;
  max_logit_rows_ = static_cast<int>(std::clamp<int64_t>((int64_t{64} << 20) / (4 * Vr), 16, max_rows_));
  max_logit_rows_ = std::min(max_logit_rows_, max_rows_);

  // Restricted-vocab head: a view when vocab_ids is one ascending run, else a gathered copy (of the
  // nextn layer's own head when it has one: glm4moe's shared_head_head).
  const model::Weight& out = m.mtp->head.present() ? m.mtp->head : m.output;
  const int32_t* ids = m.mtp->vocab_ids;
  bool one_run = true;
  for (int64_t i = 1; i < Vr; ++i)
    if (ids[i] != ids[i - 1] + 1) {
      one_run = false;
      break;
    }
  // A run starting on a kernel group boundary can view the repacked head (its groups interleave
  // rows; the last partial group's extra rows exist in the full head and are never stored).
  const model::Weight& packed = m.logits_head();
  const int align = cpu::dot_kernel(packed.type, cpu::active_isa()).row_align;
  if (one_run && !m.mtp->head.present() && ids[0] % align == 0) {
    head_ = packed.rows_slice(ids[0], Vr);
  } else if (one_run) {
    head_ = out.rows_slice(ids[0], Vr);
  } else {
    const std::size_t rb = out.row_stride;
    const std::size_t bytes = rb * static_cast<std::size_t>(Vr);
    auto gather = [&](uint8_t* dst) {
      for (int64_t i = 0; i < Vr; ++i) std::memcpy(dst + rb * static_cast<std::size_t>(i), out.row(ids[i]), rb);
    };
    // MtpConfig::head_q4: the gathered rows in Q4_0 where that saves bytes (the rule of the drafter's
    // default format, model/drafter_requant.h; ~3 ms for the demo model's 4096 x 384 rows).
    const bool to_q4 = cfg.head_q4 && model::q4_saves_bytes(out.type, out.cols);
    const quant::GGMLType type = to_q4 ? quant::GGMLType::Q4_0 : out.type;
    const std::size_t stride = to_q4 ? quant::row_bytes(type, out.cols) : rb;
    // Repacked like the main head when that one was (the gathered rows are a matrix of their own):
    // a draft step on the demo model spent ~40 % of its time in the plain Q8_0 kernel over this copy.
    const bool repack = cpu::is_repacked(packed.type) && (to_q4 || cpu::plain_type(packed.type) == out.type) &&
                        cpu::can_repack(type, Vr);
    head_copy_.resize(stride * static_cast<std::size_t>(Vr));
    head_ = model::Weight{repack ? cpu::repacked_type(type) : type, head_copy_.data(), Vr, out.cols, stride};
    if (!to_q4 && !repack) {
      gather(head_copy_.data());
    } else {
      // The plain rows go through temporaries freed here (repack_rows_in_place would keep a
      // head-sized scratch on this thread for the life of the process).
      std::vector<uint8_t> plain(bytes), q4;
      gather(plain.data());
      const uint8_t* src = plain.data();
      if (to_q4) {
        // Straight into the head unless it is repacked from the Q4_0 rows.
        if (repack) q4.resize(head_copy_.size());
        uint8_t* dst = repack ? q4.data() : head_copy_.data();
        model::requantize_rows(model::Weight{out.type, plain.data(), Vr, out.cols, rb}, type, quant::QuantMethod::Ggml,
                               dst, nullptr);
        src = dst;
      }
      if (repack) cpu::repack_rows(type, src, Vr, out.cols, head_copy_.data());
    }
  }

  if (m.ds4_mtp) {
    ds4_layers_.push_back(m.ds4_mtp->attn);
    ds4_ = std::make_unique<Ds4State>(hp, ds4_layers_, max_ctx_, max_rows_, parallel_slots_count(pool_));
  }
  const std::size_t R = static_cast<std::size_t>(max_rows_), d = hp.n_embd, n = hp.hc_count;
  emb_.resize(R * d);
  hn_.resize(R * n * d);
  x_.resize(R * n * d);
  logits_.resize(static_cast<std::size_t>(max_logit_rows_) * static_cast<std::size_t>(Vr));
  chain_streams_.resize(n * d);
}

void Mtp::check_rows(const int32_t* tokens, int m, int64_t pos0, bool want_logits) const {
  const model::HParams& hp = m_.hparams();
  if (m < 1 || m > max_rows_)
    throw_error(ErrorKind::Value, "Mtp: " + std::to_string(m) + " rows (must be 1.." + std::to_string(max_rows_) + ")");
  if (pos0 < 0 || pos0 + m > max_ctx_)
    throw_error(ErrorKind::Value, "Mtp: positions [" + std::to_string(pos0) + ", " + std::to_string(pos0 + m) +
                                      ") are outside the " + std::to_string(max_ctx_) + " MTP cells");
  if (want_logits && m > max_logit_rows_)
    throw_error(ErrorKind::Value,
                "Mtp: logits for " + std::to_string(m) + " rows exceed " + std::to_string(max_logit_rows_));
  for (int r = 0; r < m; ++r)
    if (tokens[r] < 0 || static_cast<uint32_t>(tokens[r]) >= hp.n_vocab)
      throw_error(ErrorKind::Value, "Mtp: token " + std::to_string(tokens[r]) + " is outside the vocabulary");
}

void Mtp::prepare_inputs(const float* H, const int32_t* tokens, int m, MtpState src) {
  const model::HParams& hp = m_.hparams();
  const model::MtpWeights& w = *m_.mtp;
  const int64_t d = hp.n_embd, n = hp.hc_count, nd = n * d;
  Scratch& s = *s_;
  const model::Weight& embd = w.embd.present() ? w.embd : m_.tok_embd;
  // glm4moe: the state is first normalised as its producer's head would (nullptr for strata).
  const float* state_norm = src == MtpState::Main ? w.state_norm_main : w.state_norm_chain;
  // e = fc_embedding @ RMSNorm_enorm(Emb[t']) for every row.
  parallel_ranges(pool_, m, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* er = emb_.data() + r * d;
      dequantize_weight_row(embd, tokens[r], er);
      rms_norm(er, d, hp.rms_eps, w.enorm, er);
      for (int64_t k = 0; k < n; ++k) {
        float* hr = hn_.data() + r * nd + k * d;
        const float* in = H + r * nd + k * d;
        if (state_norm) {
          rms_norm(in, d, hp.rms_eps, state_norm, hr);
          in = hr;
        }
        rms_norm(in, d, hp.rms_eps, w.hnorm, hr);
      }
    }
  });
  linear(w.fc_embedding, emb_.data(), m, s.out.data(), pool_);
  // fc_hidden over every stream of every row: one GEMM of m·n rows.
  linear(w.fc_hidden, hn_.data(), m * n, x_.data(), pool_);
  parallel_ranges(pool_, m, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* er = s.out.data() + r * d;
      for (int64_t k = 0; k < n; ++k) {
        float* xs = x_.data() + r * nd + k * d;
        for (int64_t i = 0; i < d; ++i) xs[i] = er[i] + xs[i];
      }
    }
  });
}

BlockContext Mtp::context() {
  BlockContext c;
  c.hp = &m_.hparams();
  c.w = &m_.mtp->block;
  c.kv = &kv_;
  c.kv_layer = 0;
  c.policy = policy_;
  c.use_indexer = false;
  c.rope = &rope_;
  c.s = s_;
  c.pool = pool_;
  c.experts = experts_;  // plain top-K routing, experts through the store
  c.expert_layer = expert_layer_;
  // Or among the resident experts (stream mode, STRATA_MOCE_DRAFTER_RESIDENT): no expert reads.
  if (resident_only_ && experts_) {
    c.resident = experts_->resident_map(expert_layer_);
    c.resident_only = c.resident != nullptr;
  }
  if (ds4_) {
    c.ds4 = ds4_.get();
    c.ds4_attn = &ds4_layers_[0];
    c.clamp_exp = m_.ds4_mtp->clamp_exp;
    c.clamp_shexp = m_.ds4_mtp->clamp_shexp;
  }
  return c;
}

void Mtp::finish(int m, bool want_logits) {
  last_rows_ = m;
  if (want_logits) {
    const model::MtpWeights& w = *m_.mtp;
    head_input(m_.hparams(), w.head_hc, w.shared_head_norm, x_.data(), m, *s_, s_->h.data(), pool_);
    linear(head_, s_->h.data(), m, logits_.data(), pool_);
    last_logits_ = true;
  }
}

void Mtp::run(const float* H, const int32_t* tokens, int m, int64_t pos0, bool want_logits, MtpState src) {
  check_rows(tokens, m, pos0, want_logits);
  last_rows_ = 0;
  last_logits_ = false;
  prepare_inputs(H, tokens, m, src);
  run_block(context(), x_.data(), m, pos0);
  finish(m, want_logits);
}

void Mtp::encode(const float* H, const int32_t* tokens, int m, int64_t pos0) {
  check_rows(tokens, m, pos0, false);
  last_rows_ = 0;
  last_logits_ = false;
  prepare_inputs(H, tokens, m, MtpState::Main);
  write_block_kv(context(), x_.data(), m, pos0);
}

void Mtp::run_row(const float* H, int32_t token, int64_t pos, const int32_t* cells, int64_t n_cells, bool want_logits,
                  MtpState src) {
  check_rows(&token, 1, pos, want_logits);
  if (n_cells < 1 || n_cells > s_->shape.max_list)
    throw_error(ErrorKind::Value, "Mtp::run_row: a list of " + std::to_string(n_cells) + " cells (must be 1.." +
                                      std::to_string(s_->shape.max_list) + ")");
  for (int64_t i = 0; i < n_cells; ++i)
    if (cells[i] < 0 || cells[i] > pos || (i > 0 && cells[i] <= cells[i - 1]))
      throw_error(ErrorKind::Value, "Mtp::run_row: the cell list must be ascending ids in [0, " + std::to_string(pos) +
                                        "] (entry " + std::to_string(i) + " = " + std::to_string(cells[i]) + ")");
  last_rows_ = 0;
  last_logits_ = false;
  prepare_inputs(H, &token, 1, src);
  BlockContext c = context();
  c.cell_list = cells;
  c.cell_list_n = n_cells;
  run_block(c, x_.data(), 1, pos);
  finish(1, want_logits);
}

const float* Mtp::out_streams(int r) const {
  if (r < 0 || r >= last_rows_)
    throw_error(ErrorKind::Value, "Mtp::out_streams: row " + std::to_string(r) + " not in the last run");
  const model::HParams& hp = m_.hparams();
  return x_.data() + static_cast<std::size_t>(r) * hp.hc_count * hp.n_embd;
}

const float* Mtp::draft_logits(int r) const {
  if (!last_logits_ || r < 0 || r >= last_rows_)
    throw_error(ErrorKind::Value, "Mtp::draft_logits: row " + std::to_string(r) + " has no logits");
  return logits_.data() + static_cast<std::size_t>(r) * m_.hparams().mtp_vocab;
}

int32_t Mtp::draft_token(int r) const {
  // engine::first_argmax: the scalar scan over the 4096 restricted logits was ~2 % of a draft step on the
  // demo model.
  return m_.mtp->vocab_ids[first_argmax(draft_logits(r), m_.hparams().mtp_vocab)];
}

void Mtp::draft_chain(const float* H, int32_t token, int64_t p, int n_steps, float* logits_out, int32_t* tokens_out) {
  if (n_steps < 1) throw_error(ErrorKind::Value, "Mtp::draft_chain: n_steps must be >= 1");
  const model::HParams& hp = m_.hparams();
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  const int64_t Vr = hp.mtp_vocab;
  std::memcpy(chain_streams_.data(), H, sizeof(float) * nd);
  int32_t t = token;
  for (int j = 0; j < n_steps; ++j) {
    run(chain_streams_.data(), &t, 1, p + j, true, j == 0 ? MtpState::Main : MtpState::Chained);
    if (logits_out) std::memcpy(logits_out + j * Vr, draft_logits(0), sizeof(float) * static_cast<std::size_t>(Vr));
    t = draft_token(0);
    tokens_out[j] = t;
    std::memcpy(chain_streams_.data(), out_streams(0), sizeof(float) * nd);
  }
}

}  // namespace strata::engine
