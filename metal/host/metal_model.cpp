#include "metal/host/metal_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "metal/host/dispatch.h"
#include "metal/kernels/args.h"
#include "strata/engine/vec_dot.h"
#include "strata/util/error.h"

namespace strata::mtl {
namespace {

// Element-wise op codes (metal/kernels/moe.h).
constexpr uint32_t kOpSwiglu = 0, kOpSigmoid = 1, kEwAddBroadcastOp = 2, kOpCopyBroadcast = 3;

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace

struct MetalModel::Layer {
  BufferRef attn_norm, q_norm, k_norm, ffn_norm;
  DevWeight q, k, v, o, idx_q, idx_k, idx_w;
  DevWeight router, sh_gate, sh_up, sh_down, sh_gate_inp;
  DevWeight gate_exps, up_exps, down_exps;
  BufferRef hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
};

struct MetalModel::Mtp {
  std::unique_ptr<Layer> block;
  Cells cells;
  BufferRef enorm, hnorm, head_fn, head_base, head_scale, shared_head_norm;
  DevWeight fc_embedding, fc_hidden, head;  // head: output.weight[vocab_ids], gathered once
  std::vector<uint8_t> head_rows;           // the gathered rows (host memory the head wraps)
  BufferRef H, X, tokens, emb, e, hn, logits;
};

BufferRef MetalModel::wrap(const void* p, std::size_t bytes) {
  if (p == nullptr) return {};
  owned_.push_back(dev_.wrap(p, bytes));
  return BufferRef{owned_.back().get(), 0};
}

BufferRef MetalModel::scratch(std::size_t bytes) {
  owned_.push_back(dev_.new_buffer(std::max<std::size_t>(bytes, 16)));
  return BufferRef{owned_.back().get(), 0};
}

MetalModel::DevWeight MetalModel::weight(const model::Weight& w) {
  DevWeight d;
  if (!w.present()) return d;
  d.ref = wrap(w.data, static_cast<std::size_t>(w.rows) * w.row_stride);
  d.type = w.type;
  d.rows = u32(w.rows);
  d.cols = u32(w.cols);
  d.row_bytes = u32(static_cast<int64_t>(w.row_stride));
  return d;
}

MetalModel::DevWeight MetalModel::experts(const model::ExpertWeights& w) {
  DevWeight d;
  d.ref = wrap(w.data, w.span_bytes());
  d.type = w.type;
  d.rows = u32(w.rows);
  d.cols = u32(w.cols);
  d.row_bytes = u32(static_cast<int64_t>(w.row_stride));
  d.expert_bytes = u32(static_cast<int64_t>(w.step()));  // from one expert's slice to the next
  return d;
}

std::unique_ptr<MetalModel::Layer> MetalModel::bind_layer(const model::LayerWeights& lw) {
  const model::HParams& hp = hp_;
  const int64_t d = hp.n_embd, n = hp.hc_count, nd = n * d, nmix = (2 + n) * n, Dh = hp.head_dim;
  auto L = std::make_unique<Layer>();
  L->attn_norm = wrap(lw.attn.norm, static_cast<std::size_t>(d) * 4);
  L->ffn_norm = wrap(lw.moe.norm, static_cast<std::size_t>(d) * 4);
  L->q_norm = wrap(lw.attn.q_norm, static_cast<std::size_t>(Dh) * 4);
  L->k_norm = wrap(lw.attn.k_norm, static_cast<std::size_t>(Dh) * 4);
  L->q = weight(lw.attn.q);
  L->k = weight(lw.attn.k);
  L->v = weight(lw.attn.v);
  L->o = weight(lw.attn.o);
  L->idx_q = weight(lw.attn.idx_q);
  L->idx_k = weight(lw.attn.idx_k);
  L->idx_w = weight(lw.attn.idx_w);
  L->router = weight(lw.moe.router);
  L->gate_exps = experts(lw.moe.gate);
  L->up_exps = experts(lw.moe.up);
  L->down_exps = experts(lw.moe.down);
  L->sh_gate = weight(lw.moe.sh_gate);
  L->sh_up = weight(lw.moe.sh_up);
  L->sh_down = weight(lw.moe.sh_down);
  L->sh_gate_inp = weight(lw.moe.sh_gate_inp);
  if (n > 1) {
    L->hc_attn_fn = wrap(lw.hc_attn.fn, static_cast<std::size_t>(nmix * nd) * 4);
    L->hc_attn_base = wrap(lw.hc_attn.base, static_cast<std::size_t>(nmix) * 4);
    L->hc_attn_scale = wrap(lw.hc_attn.scale, 3 * 4);
    L->hc_ffn_fn = wrap(lw.hc_ffn.fn, static_cast<std::size_t>(nmix * nd) * 4);
    L->hc_ffn_base = wrap(lw.hc_ffn.base, static_cast<std::size_t>(nmix) * 4);
    L->hc_ffn_scale = wrap(lw.hc_ffn.scale, 3 * 4);
  }
  return L;
}

MetalModel::MetalModel(Device& dev, const model::Model& m, const MetalModelConfig& cfg)
    : dev_(dev),
      m_(m),
      hp_(m.hparams()),
      cfg_(cfg),
      rope_(static_cast<int>(m.hparams().rope_dim), m.hparams().rope_base) {
  const model::HParams& hp = hp_;
  if (hp.arch == model::Arch::Glm4Moe)  // dense layers, biases and sigmoid routing are CPU-only so far
    throw_error(ErrorKind::Value, "metal backend: glm4moe is not supported (use the CPU engine)");
  if (hp.arch == model::Arch::DeepSeek4)  // compressed attention, indexer and hash routing are CPU-only so far
    throw_error(ErrorKind::Value, "metal backend: deepseek4 is not supported (use the CPU engine)");
  if (hp.kv_type == model::KvType::F16)  // the Metal kernels read int8 or f32 cells only
    throw_error(ErrorKind::Config, "metal backend: kv_type f16 is not supported (use the CPU engine)");
  m.note_cells_built();
  if (cfg.max_rows < 1 || cfg.max_rows > 512) throw_error(ErrorKind::Value, "metal backend: max_rows must be 1..512");
  max_ctx_ = cfg.max_ctx > 0 ? cfg.max_ctx : std::min<int64_t>(hp.context_length, 4096);
  const int64_t R = cfg.max_rows, d = hp.n_embd, n = hp.hc_count, nd = n * d;
  const int64_t E = hp.n_expert, K = hp.n_expert_used, F = hp.ff_expert, Fs = hp.ff_shared;
  const int64_t Hq = hp.n_head, Hkv = hp.n_head_kv, Dh = hp.head_dim, nb = (Dh + 63) / 64;
  const int64_t Hi = hp.indexer_heads, Di = hp.indexer_dim, V = hp.n_vocab;
  const int64_t nmix = (2 + n) * n;

  tok_embd_ = weight(m.tok_embd);
  output_ = weight(m.output);
  output_norm_ = wrap(m.output_norm, static_cast<std::size_t>(d) * 4);
  if (n > 1) {
    head_fn_ = wrap(m.head_hc.fn, static_cast<std::size_t>(n * nd) * 4);
    head_base_ = wrap(m.head_hc.base, static_cast<std::size_t>(n) * 4);
    head_scale_ = wrap(m.head_hc.scale, 4);
  }
  const std::size_t cells = static_cast<std::size_t>(max_ctx_);
  auto new_cells = [&](bool with_indexer, bool f32) {
    Cells c;
    c.f32 = f32;
    const std::size_t elem = f32 ? 4 : 1;
    c.k8 = scratch(cells * Hkv * Dh * elem);
    c.v8 = scratch(cells * Hkv * Dh * elem);
    if (!f32) {
      c.ks = scratch(cells * Hkv * nb * 2);
      c.vs = scratch(cells * Hkv * nb * 2);
    }
    if (with_indexer) c.ik = scratch(cells * Di * 4);
    return c;
  };
  for (const model::LayerWeights& lw : m.layers) {
    layers_.push_back(bind_layer(lw));
    Cells c = new_cells(hp.uses_indexer(), hp.kv_type == model::KvType::F32);
    c.indexer = hp.uses_indexer();
    c.sink = hp.sink_count;
    c.window = hp.sliding_window;
    c.top_k = c.indexer ? hp.indexer_top_k : 0;
    c.list_stride =
        c.window > 0 ? u32(std::min<int64_t>(max_ctx_, int64_t{c.sink} + c.window + c.top_k)) : u32(max_ctx_);
    cells_.push_back(c);
  }
  if (m.mtp) {
    const int64_t draft_cells = cfg.max_draft_cells > 0 ? cfg.max_draft_cells : 64 + 256 + 1;
    const model::MtpWeights& w = *m.mtp;
    mtp_ = std::make_unique<Mtp>();
    Mtp& t = *mtp_;
    t.block = bind_layer(w.block);
    t.cells = new_cells(false, false);  // int8 cells; the drafter never computes indexer state
    // Draft rows read the host's lists (engine::Sequence's DraftCells): sink + window + the row's own cell.
    t.cells.list_stride = u32(std::min<int64_t>(max_ctx_, draft_cells));
    t.enorm = wrap(w.enorm, static_cast<std::size_t>(d) * 4);
    t.hnorm = wrap(w.hnorm, static_cast<std::size_t>(d) * 4);
    t.shared_head_norm = wrap(w.shared_head_norm, static_cast<std::size_t>(d) * 4);
    if (n > 1) {
      t.head_fn = wrap(w.head_hc.fn, static_cast<std::size_t>(n * nd) * 4);
      t.head_base = wrap(w.head_hc.base, static_cast<std::size_t>(n) * 4);
      t.head_scale = wrap(w.head_hc.scale, 4);
    }
    t.fc_embedding = weight(w.fc_embedding);
    t.fc_hidden = weight(w.fc_hidden);
    const int64_t Vr = hp.mtp_vocab;
    const std::size_t rb = m.output.row_stride;
    t.head_rows.resize(rb * static_cast<std::size_t>(Vr));
    for (int64_t i = 0; i < Vr; ++i) std::memcpy(t.head_rows.data() + rb * i, m.output.row(w.vocab_ids[i]), rb);
    t.head = weight(model::Weight{m.output.type, t.head_rows.data(), Vr, m.output.cols, rb});
    t.H = scratch(R * nd * 4);
    t.X = scratch(R * nd * 4);
    t.tokens = scratch(R * 4);
    t.emb = scratch(R * d * 4);
    t.e = scratch(R * d * 4);
    t.hn = scratch(R * nd * 4);
    t.logits = scratch(static_cast<std::size_t>(Vr) * 4);
  }

  // Lists: sinks + window + indexer picks (windowed), or implicit (every causal cell).
  list_stride_ = cells_.empty() ? 1u : cells_[0].list_stride;
  if (mtp_) list_stride_ = std::max(list_stride_, mtp_->cells.list_stride);
  n_chunks_ = (list_stride_ + 63) / 64;
  max_cand_ = u32(max_ctx_);
  const std::size_t f = 4, N = static_cast<std::size_t>(R * K);
  tokens_ = scratch(R * 4);
  rope_cs_ = scratch(R * std::max<int64_t>(hp.rope_dim, 1) * f);
  emb_ = scratch(R * d * f);
  X_ = scratch(R * nd * f);
  flat_ = scratch(R * nd * f);
  mix_ = scratch(R * nmix * f);
  post_ = scratch(R * n * f);
  comb_ = scratch(R * n * n * f);
  collapsed_ = scratch(R * d * f);
  xn_ = scratch(R * d * f);
  q_ = scratch(R * hp.q_rows() * f);
  k_ = scratch(R * hp.kv_rows() * f);
  v_ = scratch(R * hp.kv_rows() * f);
  qh_ = scratch(R * Hq * Dh * f);
  att_ = scratch(R * Hq * Dh * f);
  out_ = scratch(R * d * f);
  ones_ = scratch(std::max<std::size_t>(N, static_cast<std::size_t>(R * n * n)) * f);
  lists_ = scratch(R * list_stride_ * 4);
  n_cells_ = scratch(R * 4);
  iq_ = scratch(R * std::max<int64_t>(Hi * Di, 1) * f);
  iw_ = scratch(R * std::max<int64_t>(Hi, 1) * f);
  iscores_ = scratch(R * max_cand_ * f);
  part_o_ = scratch(static_cast<std::size_t>(n_chunks_) * R * Hq * Dh * f);
  part_ml_ = scratch(static_cast<std::size_t>(n_chunks_) * R * Hq * 2 * f);
  rlogits_ = scratch(R * E * f);
  ids_ = scratch(N * 4);
  rw_ = scratch(N * f);
  status_ = scratch((hp.n_layer + 1) * R * 4);
  plan_hdr_ = scratch(sizeof(PlanHeader));
  plan_ge_ = scratch((std::min<std::size_t>(E, N) + 1) * 4);
  plan_go_ = scratch((std::min<std::size_t>(E, N) + 2) * 4);
  plan_se_ = scratch(N * 4);
  plan_es_ = scratch(N * 4);
  ge_ = scratch(N * F * f);
  ue_ = scratch(N * F * f);
  routed_ = scratch(N * d * f);
  sg_ = scratch(R * std::max<int64_t>(Fs, 1) * f);
  su_ = scratch(R * std::max<int64_t>(Fs, 1) * f);
  shared_ = scratch(R * d * f);
  shgate_ = scratch(R * f);
  h_ = scratch(R * d * f);
  hn_ = scratch(R * d * f);
  logits_ = scratch(R * V * f);
  // Constants: ones (the attention expand's weight, and post = comb = 1 when n = 1).
  float* one = ones_.as<float>();
  std::fill(one, one + std::max<std::size_t>(N, static_cast<std::size_t>(R * n * n)), 1.0f);
}

MetalModel::~MetalModel() = default;

void MetalModel::gemv(const DevWeight& w, BufferRef x, uint32_t nx, uint32_t x_stride, BufferRef y, uint32_t y_stride) {
  GemvCall c;
  c.type = w.type;
  c.W = w.ref;
  c.rows = w.rows;
  c.cols = w.cols;
  c.row_bytes = w.row_bytes;
  c.X = x;
  c.nx = nx;
  c.x_stride = x_stride;
  c.Y = y;
  c.y_stride = y_stride;
  encode_gemv(dev_, c, (tiles_ ? *tiles_ : cfg_.tiles).pick(w.rows));
}

const int32_t* MetalModel::draft_vocab_ids() const { return mtp_ ? m_.mtp->vocab_ids : nullptr; }

const float* MetalModel::row_streams(int r) const {
  const std::size_t nd = static_cast<std::size_t>(hp_.hc_count) * hp_.n_embd;
  return X_.as<float>() + static_cast<std::size_t>(r) * nd;
}

void MetalModel::run_rows(const int32_t* tokens, int R, int64_t start, engine::LogitRows which, float* logits_out,
                          int draft_from_row) {
  if (R < 1 || R > cfg_.max_rows || start < 0 || start + R > max_ctx_)
    throw_error(ErrorKind::Internal, "metal run_rows: " + std::to_string(R) + " rows at " + std::to_string(start) +
                                         " do not fit the chunk or the context");
  const model::HParams& hp = hp_;
  const uint32_t d = hp.n_embd, n = hp.hc_count, nd = n * d;
  // Host inputs of the chunk: tokens, RoPE angles per row, implicit list lengths.
  std::memcpy(tokens_.as<int32_t>(), tokens, static_cast<std::size_t>(R) * 4);
  const int64_t rd = std::max<int64_t>(hp.rope_dim, 1);
  for (int r = 0; r < R; ++r) {
    if (hp.rope_dim > 0) rope_.angles(start + r, rope_cs_.as<float>() + r * rd);
    if (hp.sliding_window == 0) n_cells_.as<int32_t>()[r] = static_cast<int32_t>(start + r + 1);
  }
  tiles_ = &cfg_.tiles;
  Encoder& e = dev_.encoder();
  // Embedding into every stream.
  encode_get_rows(dev_, tok_embd_.type, tok_embd_.ref, d, tok_embd_.row_bytes, tokens_, u32(R), n > 1 ? emb_ : X_,
                  n > 1 ? d : nd);
  e.barrier();
  if (n > 1) {
    EwArgs a{u32(R) * nd, kOpCopyBroadcast, d, nd};
    encode_elementwise(dev_, a, emb_, {}, X_);
    e.barrier();
  }
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = *layers_[l];
    hc_enter(L, X_, false, R);
    attention(L, cells_[l], X_, R, start, false);
    hc_enter(L, X_, true, R);
    moe(L, X_, static_cast<int>(l), R, draft_from_row, true);
  }
  // Logits of the last row, or of every row (the head is row-independent: each row's bits are those
  // of a one-row head).
  const int logit_rows = which == engine::LogitRows::All ? R : (which == engine::LogitRows::Last ? 1 : 0);
  if (logit_rows > 0)
    head(X_.at(static_cast<std::size_t>(R - logit_rows) * nd * 4), logit_rows, head_fn_, head_base_, head_scale_,
         output_norm_, output_, logits_);
  dev_.submit();
  const int32_t* st = status_.as<int32_t>();
  for (std::size_t l = 0; l < layers_.size(); ++l)
    for (int r = 0; r < R; ++r)
      if (st[l * static_cast<std::size_t>(cfg_.max_rows) + static_cast<std::size_t>(r)] != 0)
        throw_error(ErrorKind::Value, "metal eval: router probabilities of layer " + std::to_string(l) + " row " +
                                          std::to_string(r) + " contain NaN or -inf");
  if (logit_rows > 0 && logits_out)
    std::memcpy(logits_out, logits_.as<float>(), sizeof(float) * hp.n_vocab * static_cast<std::size_t>(logit_rows));
}

// The hyper-connection entry (coefficients, collapse) and the sub-layer's weighted RMSNorm -> xn.
void MetalModel::hc_enter(const Layer& L, BufferRef X, bool ffn, int R) {
  const model::HParams& hp = hp_;
  const uint32_t d = hp.n_embd, n = hp.hc_count, nd = n * d, nmix = (2 + n) * n;
  Encoder& e = dev_.encoder();
  RmsArgs rn{d, u32(R), d, d, hp.rms_eps, 1};
  const BufferRef norm = ffn ? L.ffn_norm : L.attn_norm;
  if (n == 1) {
    encode_rms(dev_, rn, X, norm, xn_);
    e.barrier();
    return;
  }
  RmsArgs flat{nd, u32(R), nd, nd, hp.rms_eps, 0};
  encode_rms(dev_, flat, X, {}, flat_);
  e.barrier();
  DevWeight fn;
  fn.ref = ffn ? L.hc_ffn_fn : L.hc_attn_fn;
  fn.type = quant::GGMLType::F32;
  fn.rows = nmix;
  fn.cols = nd;
  fn.row_bytes = nd * 4;
  gemv(fn, flat_, u32(R), nd, mix_, nmix);
  e.barrier();
  HcArgs ha{n, d, u32(R), hp.hc_sinkhorn_iters, hp.hc_eps, 0};
  encode_hc_collapse(dev_, ha, mix_, ffn ? L.hc_ffn_scale : L.hc_attn_scale, ffn ? L.hc_ffn_base : L.hc_attn_base, X,
                     post_, comb_, collapsed_);
  e.barrier();
  encode_rms(dev_, rn, collapsed_, norm, xn_);
  e.barrier();
}

// Attention of R rows at positions start..: projections, prep (K/V into the block's cells), lists,
// attention, output projection, expand into the streams. kv_only: the K/V write alone (catch-up rows).
void MetalModel::attention(const Layer& L, const Cells& c, BufferRef X, int R, int64_t start, bool kv_only,
                           std::span<const int32_t> host_list) {
  const bool explicit_list = !host_list.empty();
  const model::HParams& hp = hp_;
  const uint32_t d = hp.n_embd, n = hp.hc_count, Hq = hp.n_head, Hkv = hp.n_head_kv, Dh = hp.head_dim;
  const uint32_t qrows = hp.q_rows(), kvrows = hp.kv_rows(), nb = (Dh + 63) / 64;
  Encoder& e = dev_.encoder();
  if (!kv_only) gemv(L.q, xn_, u32(R), d, q_, qrows);
  gemv(L.k, xn_, u32(R), d, k_, kvrows);
  gemv(L.v, xn_, u32(R), d, v_, kvrows);
  if (c.indexer) {
    const uint32_t Di = hp.indexer_dim, Hi = hp.indexer_heads;
    gemv(L.idx_k, xn_, u32(R), d, c.ik.at(static_cast<std::size_t>(start) * Di * 4), Di);
    if (!kv_only) {
      gemv(L.idx_q, xn_, u32(R), d, iq_, Hi * Di);
      gemv(L.idx_w, xn_, u32(R), d, iw_, Hi);
    }
  }
  e.barrier();
  QsaPrepArgs pa{};
  pa.n_rows = u32(R);
  pa.n_head = Hq;
  pa.n_head_kv = Hkv;
  pa.head_dim = Dh;
  pa.rope_dim = hp.rope_dim;
  pa.gated = hp.attn_gated ? 1u : 0u;
  pa.q_stride = qrows;
  pa.kv_stride = kvrows;
  pa.cs_stride = std::max<uint32_t>(hp.rope_dim, 1);
  pa.eps = hp.rms_eps;
  pa.cell0 = u32(start);
  pa.kv_blocks = nb;
  const KvFormat fmt = c.f32 ? KvFormat::F32 : KvFormat::Int8;
  encode_qsa_prep(dev_, pa, QsaBuffers{q_, k_, v_, L.q_norm, L.k_norm, rope_cs_, qh_, c.k8, c.ks, c.v8, c.vs}, kv_only,
                  fmt);
  e.barrier();
  if (kv_only) return;
  uint32_t max_w = u32(start + R);  // implicit lists: the last row attends to every cell up to it
  if (explicit_list) {
    // One draft row reading the host's list (DraftCells::draft_row_cells).
    if (R != 1 || host_list.size() > c.list_stride)
      throw_error(ErrorKind::Internal,
                  "metal attention: a host list is one row of 1.." + std::to_string(c.list_stride) + " cells");
    std::memcpy(lists_.as<int32_t>(), host_list.data(), host_list.size() * sizeof(int32_t));
    n_cells_.as<int32_t>()[0] = static_cast<int32_t>(host_list.size());
    max_w = u32(static_cast<int64_t>(host_list.size()));
  } else if (c.window > 0) {
    CellArgs ca{};
    ca.n_rows = u32(R);
    ca.pos0 = u32(start);
    ca.sink = c.sink;
    ca.window = c.window;
    ca.top_k = c.top_k;
    ca.list_stride = c.list_stride;
    ca.score_stride = max_cand_;
    ca.heads = hp.indexer_heads;
    ca.dim = hp.indexer_dim;
    ca.q_stride = hp.indexer_heads * hp.indexer_dim;
    ca.w_stride = hp.indexer_heads;
    ca.use_scores = c.indexer ? 1u : 0u;
    if (c.indexer) {
      encode_indexer_scores(dev_, ca, iq_, iw_, c.ik, iscores_, u32(start + R));
      e.barrier();
    }
    encode_select_cells(dev_, ca, iscores_, lists_, n_cells_);
    e.barrier();
    max_w = std::min(max_w, c.list_stride);
  } else {
    for (int r = 0; r < R; ++r) n_cells_.as<int32_t>()[r] = static_cast<int32_t>(start + r + 1);
  }
  AttnArgs aa{};
  aa.n_rows = u32(R);
  aa.n_head = Hq;
  aa.n_head_kv = Hkv;
  aa.head_dim = Dh;
  aa.kv_blocks = nb;
  aa.list_stride = c.list_stride;
  aa.implicit_list = (explicit_list || c.window > 0) ? 0u : 1u;
  aa.plane_stride = u32(cfg_.max_rows);
  aa.n_chunks = n_chunks_;
  aa.q_stride = Hq * Dh;
  aa.gate_stride = qrows;
  aa.gated = hp.attn_gated ? 1u : 0u;
  aa.out_stride = Hq * Dh;
  aa.sqrt_dh = std::sqrt(static_cast<float>(Dh));
  encode_attention(dev_, aa, AttnBuffers{qh_, c.k8, c.ks, c.v8, c.vs, lists_, n_cells_, q_, att_, part_o_, part_ml_},
                   max_w, AttnPath::Auto, fmt);
  e.barrier();
  gemv(L.o, att_, u32(R), Hq * Dh, out_, d);
  e.barrier();
  // Expand the attention output into the streams: combine with k = 1, w = 1, no shared part.
  CombineArgs cb{d, n, u32(R), 1, 0};
  encode_combine(dev_, cb, CombineBuffers{out_, ones_, {}, {}, n > 1 ? post_ : ones_, n > 1 ? comb_ : ones_, X, X});
  e.barrier();
}

void MetalModel::moe(const Layer& L, BufferRef X, int status_slot, int R, int draft_from_row, bool main) {
  const model::HParams& hp = hp_;
  const uint32_t d = hp.n_embd, n = hp.hc_count, E = hp.n_expert, K = hp.n_expert_used, F = hp.ff_expert;
  const uint32_t Fs = hp.ff_shared, N = u32(R) * K;
  Encoder& e = dev_.encoder();
  gemv(L.router, xn_, u32(R), d, rlogits_, E);
  if (Fs > 0) {
    gemv(L.sh_gate, xn_, u32(R), d, sg_, Fs);
    gemv(L.sh_up, xn_, u32(R), d, su_, Fs);
    gemv(L.sh_gate_inp, xn_, u32(R), d, shgate_, 1);
  }
  e.barrier();
  RouteArgs ra{};
  ra.n_rows = u32(R);
  ra.n_experts = E;
  ra.k = K;
  ra.row_stride = E;
  // No residency map on this path (see MetalModelConfig::moce): the MOCE parameters cannot change the
  // selection, but the main window passes them and its draft rows as the CPU does.
  const routing::MoceParams mp = main ? cfg_.moce : routing::MoceParams{};
  ra.resident_bonus = mp.resident_bonus;
  ra.rank1_scale = mp.rank1_scale;
  ra.protect = mp.protect;
  ra.draft = mp.draft ? 1u : 0u;
  ra.draft_from_row = draft_from_row;
  ra.has_resident = 0;
  ra.softmax = 1;
  encode_route(dev_, ra, rlogits_, {}, ids_, rw_,
               status_.at(static_cast<std::size_t>(status_slot) * cfg_.max_rows * 4));
  if (Fs > 0) {
    encode_elementwise(dev_, EwArgs{u32(R) * Fs, kOpSwiglu, 0, 0}, sg_, su_, sg_);
    encode_elementwise(dev_, EwArgs{u32(R), kOpSigmoid, 0, 0}, shgate_, {}, shgate_);
  }
  e.barrier();
  PlanArgs pa{N, K, E, 0};
  encode_plan(dev_, pa, ids_, {}, plan_hdr_, plan_ge_, plan_go_, plan_se_, plan_es_);
  if (Fs > 0) gemv(L.sh_down, sg_, u32(R), Fs, shared_, d);
  e.barrier();
  MoeGemvCall c;
  c.header = plan_hdr_;
  c.group_expert = plan_ge_;
  c.group_offset = plan_go_;
  c.slot_entry = plan_se_;
  c.max_groups = std::min(E, N);
  c.k = K;
  auto expert_call = [&](const DevWeight& w, BufferRef x, uint32_t x_stride, bool per_token, BufferRef y,
                         uint32_t y_stride) {
    c.type = w.type;
    c.W = w.ref;
    c.rows = w.rows;
    c.cols = w.cols;
    c.row_bytes = w.row_bytes;
    c.expert_bytes = w.expert_bytes;
    c.X = x;
    c.x_stride = x_stride;
    c.x_per_token = per_token;
    c.Y = y;
    c.y_stride = y_stride;
    encode_moe_gemv(dev_, c, tiles_->pick(w.rows));
  };
  expert_call(L.gate_exps, xn_, d, true, ge_, F);
  expert_call(L.up_exps, xn_, d, true, ue_, F);
  e.barrier();
  encode_elementwise(dev_, EwArgs{N * F, kOpSwiglu, 0, 0}, ge_, ue_, ge_);
  e.barrier();
  expert_call(L.down_exps, ge_, F, false, routed_, d);
  e.barrier();
  CombineArgs cb{d, n, u32(R), K, Fs > 0 ? 1u : 0u};
  encode_combine(dev_, cb,
                 CombineBuffers{routed_, rw_, shared_, shgate_, n > 1 ? post_ : ones_, n > 1 ? comb_ : ones_, X, X});
  e.barrier();
}

// One row: HyperHead (n > 1) or the row itself, the final RMSNorm, the head GEMV -> logits.
void MetalModel::head(BufferRef xrows, int rows, BufferRef fn_ref, BufferRef base, BufferRef scale, BufferRef norm,
                      const DevWeight& out, BufferRef logits) {
  const model::HParams& hp = hp_;
  const uint32_t d = hp.n_embd, n = hp.hc_count, nd = n * d;
  Encoder& e = dev_.encoder();
  const uint32_t m = u32(rows);
  RmsArgs out_norm{d, m, d, d, hp.rms_eps, 1};
  if (n == 1) {
    encode_rms(dev_, out_norm, xrows, norm, hn_);
  } else {
    RmsArgs flat{nd, m, nd, nd, hp.rms_eps, 0};
    encode_rms(dev_, flat, xrows, {}, flat_);
    e.barrier();
    DevWeight fn;
    fn.ref = fn_ref;
    fn.type = quant::GGMLType::F32;
    fn.rows = n;
    fn.cols = nd;
    fn.row_bytes = nd * 4;
    gemv(fn, flat_, m, nd, mix_, n);
    e.barrier();
    HcArgs ha{n, d, m, 0, hp.hc_eps, 1};
    encode_hc_collapse(dev_, ha, mix_, scale, base, xrows, {}, {}, h_);
    e.barrier();
    encode_rms(dev_, out_norm, h_, norm, hn_);
  }
  e.barrier();
  gemv(out, hn_, m, d, logits, out.rows);
}

// The drafter's input rows (mtp_->H, mtp_->tokens, m rows) -> mtp_->X:
// X_s = fc_embedding @ RMSNorm_enorm(Emb[t]) + fc_hidden @ RMSNorm_hnorm(H_s), fc_hidden over all m·n
// streams as one GEMV.
void MetalModel::mtp_inputs(BufferRef H, int m) {
  const model::HParams& hp = hp_;
  Mtp& t = *mtp_;
  const uint32_t d = hp.n_embd, n = hp.hc_count, nd = n * d;
  Encoder& e = dev_.encoder();
  encode_get_rows(dev_, tok_embd_.type, tok_embd_.ref, d, tok_embd_.row_bytes, t.tokens, u32(m), t.emb, d);
  encode_rms(dev_, RmsArgs{d, u32(m) * n, d, d, hp.rms_eps, 1}, H, t.hnorm, t.hn);
  e.barrier();
  encode_rms(dev_, RmsArgs{d, u32(m), d, d, hp.rms_eps, 1}, t.emb, t.enorm, t.emb);
  gemv(t.fc_hidden, t.hn, u32(m) * n, d, t.X, d);
  e.barrier();
  gemv(t.fc_embedding, t.emb, u32(m), d, t.e, d);
  e.barrier();
  encode_elementwise(dev_, EwArgs{u32(m) * nd, kEwAddBroadcastOp, d, nd}, t.e, t.X, t.X);
  e.barrier();
}

// The drafter's K/V of m committed rows q0.. (streams H, next tokens), K/V only.
void MetalModel::draft_encode(const float* H, const int32_t* next_tokens, int m, int64_t q0) {
  const model::HParams& hp = hp_;
  Mtp& t = *mtp_;
  if (m < 1 || m > cfg_.max_rows)
    throw_error(ErrorKind::Internal, "metal draft_encode: " + std::to_string(m) + " rows");
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  std::memcpy(t.H.as<float>(), H, static_cast<std::size_t>(m) * nd * sizeof(float));
  std::memcpy(t.tokens.as<int32_t>(), next_tokens, static_cast<std::size_t>(m) * sizeof(int32_t));
  const int64_t rd = std::max<int64_t>(hp.rope_dim, 1);
  for (int r = 0; r < m; ++r)
    if (hp.rope_dim > 0) rope_.angles(q0 + r, rope_cs_.as<float>() + r * rd);
  tiles_ = &cfg_.drafter_tiles;
  mtp_inputs(t.H, m);
  hc_enter(*t.block, t.X, false, m);
  attention(*t.block, t.cells, t.X, m, q0, /*kv_only=*/true);
  dev_.submit();
}

int32_t MetalModel::draft_row(const float* H, int32_t token, int64_t pos, std::span<const int32_t> cells,
                              float* logits_out, float* streams_out, bool /*chained*/) {
  const model::HParams& hp = hp_;
  Mtp& t = *mtp_;
  if (cells.empty()) throw_error(ErrorKind::Internal, "metal draft_row: an empty cell list");
  const std::size_t nd = static_cast<std::size_t>(hp.hc_count) * hp.n_embd;
  const int64_t Vr = hp.mtp_vocab;
  if (H != t.H.as<float>()) std::memcpy(t.H.as<float>(), H, nd * sizeof(float));
  t.tokens.as<int32_t>()[0] = token;
  if (hp.rope_dim > 0) rope_.angles(pos, rope_cs_.as<float>());
  tiles_ = &cfg_.drafter_tiles;
  mtp_inputs(t.H, 1);
  const Layer& L = *t.block;
  hc_enter(L, t.X, false, 1);
  attention(L, t.cells, t.X, 1, pos, false, cells);
  hc_enter(L, t.X, true, 1);
  moe(L, t.X, static_cast<int>(layers_.size()), 1, -1, false);
  head(t.X, 1, t.head_fn, t.head_base, t.head_scale, t.shared_head_norm, t.head, t.logits);
  dev_.submit();
  if (status_.as<int32_t>()[layers_.size() * static_cast<std::size_t>(cfg_.max_rows)] != 0)
    throw_error(ErrorKind::Value, "draft_step: router probabilities contain NaN or -inf");
  const float* l = t.logits.as<float>();
  if (logits_out) std::memcpy(logits_out, l, static_cast<std::size_t>(Vr) * sizeof(float));
  std::memcpy(streams_out, t.X.as<float>(), nd * sizeof(float));  // chained: the step's output streams
  return m_.mtp->vocab_ids[engine::first_argmax(l, Vr)];          // the CPU drafter's rule (Mtp::draft_token)
}

std::unique_ptr<engine::Sequence> metal_sequence(Device& dev, const model::Model& m, MetalModelConfig cfg,
                                                 const engine::SequenceConfig& seq) {
  if (seq.mtp_sink < 0 || seq.mtp_sink > 1024 || seq.mtp_window < 1 || seq.mtp_window > 2051)
    throw_error(ErrorKind::Value, "metal backend: the MTP sink must be 0..1024 and the window 1..2051 (got " +
                                      std::to_string(seq.mtp_sink) + ", " + std::to_string(seq.mtp_window) + ")");
  cfg.max_draft_cells = seq.mtp_sink + seq.mtp_window + 1;
  return std::make_unique<engine::Sequence>(std::make_unique<MetalModel>(dev, m, cfg), seq);
}

}  // namespace strata::mtl
