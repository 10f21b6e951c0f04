#include "metal/host/dispatch.h"

#include <algorithm>
#include <string>

#include "strata/util/error.h"

namespace strata::mtl {
namespace {

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

[[noreturn]] void bad(const std::string& what) { throw_error(ErrorKind::Value, "metal dispatch: " + what); }

}  // namespace

void encode_route(Device& dev, const RouteArgs& a, BufferRef x, BufferRef resident, BufferRef ids, BufferRef weights,
                  BufferRef status) {
  if (a.n_experts < 1 || a.n_experts > kRouteMaxExperts)
    bad("router: " + std::to_string(a.n_experts) + " experts (the kernel takes 1.." + std::to_string(kRouteMaxExperts) +
        ")");
  if (a.k < 1 || a.k > a.n_experts || a.k > kRouteMaxK)
    bad("router: k = " + std::to_string(a.k) + " must be in [1, min(E, " + std::to_string(kRouteMaxK) + ")]");
  if (a.row_stride < a.n_experts) bad("router: row stride below E");
  if (a.n_rows == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_route_rows"));
  set_args(e, 0, a);
  e.set_buffer(1, x);
  e.set_buffer(2, a.has_resident ? resident : x);  // bound either way (Metal's validation wants it)
  e.set_buffer(3, ids);
  e.set_buffer(4, weights);
  e.set_buffer(5, status);
  e.set_threadgroup_memory(0, a.softmax ? kRouteRowsPerGroup * (a.n_experts + 1) * 4 : 16);
  e.dispatch(Dim3{ceil_div(a.n_rows, kRouteRowsPerGroup), 1, 1}, Dim3{32 * kRouteRowsPerGroup, 1, 1});
}

void encode_plan(Device& dev, const PlanArgs& a, BufferRef ids, BufferRef resident, BufferRef header,
                 BufferRef group_expert, BufferRef group_offset, BufferRef slot_entry, BufferRef entry_slot) {
  if (a.n_experts < 1 || a.n_experts > kRouteMaxExperts)
    bad("plan: " + std::to_string(a.n_experts) + " experts (the kernel takes 1.." + std::to_string(kRouteMaxExperts) +
        ")");
  if (a.n_entries > kPlanMaxEntries) bad("plan: " + std::to_string(a.n_entries) + " entries (at most 65535)");
  if (a.k < 1) bad("plan: k must be >= 1");
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_plan"));
  set_args(e, 0, a);
  e.set_buffer(1, ids);
  e.set_buffer(2, a.has_resident ? resident : ids);
  e.set_buffer(3, header);
  e.set_buffer(4, group_expert);
  e.set_buffer(5, group_offset);
  e.set_buffer(6, slot_entry);
  e.set_buffer(7, entry_slot);
  e.set_threadgroup_memory(0, a.n_experts * 4);
  e.set_threadgroup_memory(1, a.n_experts * 4);
  e.set_threadgroup_memory(2, a.n_experts * 4);
  e.set_threadgroup_memory(3, (kPlanThreads / 32 + 1) * 4);
  e.dispatch(Dim3{1, 1, 1}, Dim3{kPlanThreads, 1, 1});
}

const char* combine_kernel(uint32_t d, uint32_t n, bool use_fast) {
  return use_fast && combine_has_fast_path(d, n) ? "strata_combine_fast_2560x4" : "strata_combine_generic";
}

void encode_combine(Device& dev, const CombineArgs& a, const CombineBuffers& b, bool use_fast) {
  if (a.n < 1 || a.n > 64) bad("combine: " + std::to_string(a.n) + " streams (1..64)");
  if (a.n_tok == 0 || a.d == 0) return;
  Encoder& e = dev.encoder();
  const bool fast = use_fast && combine_has_fast_path(a.d, a.n);
  e.set_pipeline(dev.pipeline(combine_kernel(a.d, a.n, use_fast)));
  set_args(e, 0, a);
  e.set_buffer(1, b.routed);
  e.set_buffer(2, b.weights);
  e.set_buffer(3, a.has_shared ? b.shared : b.routed);
  e.set_buffer(4, a.has_shared ? b.shared_gate : b.weights);
  e.set_buffer(5, b.post);
  e.set_buffer(6, b.comb);
  e.set_buffer(7, b.x_in);
  e.set_buffer(8, b.x_out);
  const uint32_t threads = 128;
  const uint32_t per_tok = fast ? a.d / 4 : a.d;
  e.dispatch(Dim3{ceil_div(per_tok, threads), a.n_tok, 1}, Dim3{threads, 1, 1});
}

void encode_rms(Device& dev, const RmsArgs& a, BufferRef x, BufferRef w, BufferRef out) {
  if (a.n == 0) bad("rms: empty rows");
  if (a.n_rows == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_rms_rows"));
  set_args(e, 0, a);
  e.set_buffer(1, x);
  e.set_buffer(2, a.has_weight ? w : x);
  e.set_buffer(3, out);
  e.set_threadgroup_memory(0, (kRmsThreads / 32 + 1) * 4);
  e.dispatch(Dim3{a.n_rows, 1, 1}, Dim3{kRmsThreads, 1, 1});
}

void encode_hc_collapse(Device& dev, const HcArgs& a, BufferRef mix, BufferRef scale, BufferRef base, BufferRef X,
                        BufferRef post, BufferRef comb, BufferRef out) {
  if (a.n < 1 || a.n > 16) bad("hyper-connection: " + std::to_string(a.n) + " streams (the kernel takes 1..16)");
  if (a.n_rows == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_hc_collapse"));
  set_args(e, 0, a);
  e.set_buffer(1, mix);
  e.set_buffer(2, scale);
  e.set_buffer(3, base);
  e.set_buffer(4, X);
  e.set_buffer(5, a.head ? out : post);
  e.set_buffer(6, a.head ? out : comb);
  e.set_buffer(7, out);
  e.set_threadgroup_memory(0, a.n * 4);
  e.dispatch(Dim3{a.n_rows, 1, 1}, Dim3{kHcThreads, 1, 1});
}

bool gemv_supported(quant::GGMLType type) {
  using quant::GGMLType;
  switch (type) {
    case GGMLType::F32:
    case GGMLType::F16:
    case GGMLType::BF16:
    case GGMLType::Q8_0:
    case GGMLType::Q4_0:
    case GGMLType::Q5_0:
    case GGMLType::Q5_1:
    case GGMLType::IQ4_NL:
    case GGMLType::Q4_K:
    case GGMLType::Q6_K:
    case GGMLType::Q2_K:
    case GGMLType::Q3_K:
    case GGMLType::Q5_K:
    case GGMLType::IQ4_XS:
    case GGMLType::IQ2_XS:
    case GGMLType::IQ3_XXS:
    case GGMLType::IQ2_XXS:
    case GGMLType::IQ3_S:
    case GGMLType::IQ2_S:
    case GGMLType::IQ1_S:
    case GGMLType::IQ1_M: return true;
    default: return false;
  }
}

const char* gemv_type_suffix(quant::GGMLType type) {
  using quant::GGMLType;
  switch (type) {
    case GGMLType::F32: return "f32";
    case GGMLType::F16: return "f16";
    case GGMLType::BF16: return "bf16";
    case GGMLType::Q8_0: return "q8_0";
    case GGMLType::Q4_0: return "q4_0";
    case GGMLType::Q5_0: return "q5_0";
    case GGMLType::Q5_1: return "q5_1";
    case GGMLType::IQ4_NL: return "iq4_nl";
    case GGMLType::Q4_K: return "q4_k";
    case GGMLType::Q6_K: return "q6_k";
    case GGMLType::Q2_K: return "q2_k";
    case GGMLType::Q3_K: return "q3_k";
    case GGMLType::Q5_K: return "q5_k";
    case GGMLType::IQ4_XS: return "iq4_xs";
    case GGMLType::IQ2_XS: return "iq2_xs";
    case GGMLType::IQ3_XXS: return "iq3_xxs";
    case GGMLType::IQ2_XXS: return "iq2_xxs";
    case GGMLType::IQ3_S: return "iq3_s";
    case GGMLType::IQ2_S: return "iq2_s";
    case GGMLType::IQ1_S: return "iq1_s";
    case GGMLType::IQ1_M: return "iq1_m";
    default: bad(std::string("no Metal GEMV kernel for type ") + quant::type_name(type));
  }
}

namespace {
void check_matrix(quant::GGMLType type, uint32_t cols, uint32_t row_bytes) {
  if (!gemv_supported(type)) bad(std::string("no Metal GEMV kernel for type ") + quant::type_name(type));
  const int64_t blk = quant::block_size(type);
  if (blk > 1 && cols % blk != 0)
    bad(std::string(quant::type_name(type)) + " rows of " + std::to_string(cols) + " elements (not a multiple of " +
        std::to_string(blk) + ")");
  if (row_bytes < quant::row_bytes(type, cols)) bad("row stride below the row size");
}
}  // namespace

void encode_gemv(Device& dev, const GemvCall& c, const GemvTile& t) {
  if (!tile_supported(t)) bad("unsupported GEMV tile " + tile_string(t));
  check_matrix(c.type, c.cols, c.row_bytes);
  if (c.rows == 0 || c.nx == 0) return;
  if (c.nx > 1 && (c.x_stride < c.cols || c.y_stride < c.rows)) bad("GEMV: activation or output stride too small");
  FunctionConstants fc;
  fc.set_uint(kFcGemvL, t.L).set_uint(kFcGemvR, t.R).set_uint(kFcGemvK, t.K);
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline(std::string("strata_gemv_") + gemv_type_suffix(c.type), fc));
  GemvArgs a{};
  a.rows = c.rows;
  a.cols = c.cols;
  a.row_bytes = c.row_bytes;
  a.nx = c.nx;
  a.x_stride = c.x_stride;
  a.y_stride = c.y_stride;
  set_args(e, 0, a);
  e.set_buffer(1, c.W);
  e.set_buffer(2, c.X);
  e.set_buffer(3, c.Y);
  const uint32_t rows_per_group = t.S * (32 / t.L) * t.R;
  e.dispatch(Dim3{ceil_div(c.rows, rows_per_group), ceil_div(c.nx, t.K), 1}, Dim3{32 * t.S, 1, 1});
}

void encode_get_rows(Device& dev, quant::GGMLType type, BufferRef W, uint32_t cols, uint32_t row_bytes, BufferRef ids,
                     uint32_t n_ids, BufferRef out, uint32_t out_stride) {
  check_matrix(type, cols, row_bytes);
  if (n_ids == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline(std::string("strata_get_rows_") + gemv_type_suffix(type)));
  GemvArgs a{};
  a.cols = cols;
  a.row_bytes = row_bytes;
  a.y_stride = out_stride;
  set_args(e, 0, a);
  e.set_buffer(1, W);
  e.set_buffer(2, ids);
  e.set_buffer(3, out);
  const uint32_t unit = quant::block_size(type) > 1 ? 16 : 8;  // the smallest unit of any format: enough threads
  const uint32_t threads = 64;
  e.dispatch(Dim3{ceil_div(ceil_div(cols, unit), threads), n_ids, 1}, Dim3{threads, 1, 1});
}

void encode_moe_gemv(Device& dev, const MoeGemvCall& c, const GemvTile& t) {
  if (!tile_supported(t)) bad("unsupported GEMV tile " + tile_string(t));
  check_matrix(c.type, c.cols, c.row_bytes);
  if (c.rows == 0 || c.max_groups == 0) return;
  FunctionConstants fc;
  fc.set_uint(kFcGemvL, t.L).set_uint(kFcGemvR, t.R).set_uint(kFcGemvK, t.K);
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline(std::string("strata_moe_gemv_") + gemv_type_suffix(c.type), fc));
  GemvArgs a{};
  a.rows = c.rows;
  a.cols = c.cols;
  a.row_bytes = c.row_bytes;
  a.x_stride = c.x_stride;
  a.y_stride = c.y_stride;
  a.expert_bytes = c.expert_bytes;
  a.k = c.x_per_token ? c.k : 0;
  set_args(e, 0, a);
  e.set_buffer(1, c.W);
  e.set_buffer(2, c.X);
  e.set_buffer(3, c.Y);
  e.set_buffer(4, c.header);
  e.set_buffer(5, c.group_expert);
  e.set_buffer(6, c.group_offset);
  e.set_buffer(7, c.slot_entry);
  const uint32_t rows_per_group = t.S * (32 / t.L) * t.R;
  e.dispatch(Dim3{ceil_div(c.rows, rows_per_group), c.max_groups, 1}, Dim3{32 * t.S, 1, 1});
}

void encode_elementwise(Device& dev, const EwArgs& a, BufferRef x, BufferRef y, BufferRef out) {
  if (a.op > 3) bad("elementwise: unknown op " + std::to_string(a.op));
  if ((a.op == 2 || a.op == 3) && (a.inner == 0 || a.group == 0)) bad("elementwise: broadcast shape");
  if (a.n == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_elementwise"));
  set_args(e, 0, a);
  e.set_buffer(1, x);
  e.set_buffer(2, y.buffer ? y : x);
  e.set_buffer(3, out);
  e.dispatch(Dim3{ceil_div(a.n, 256), 1, 1}, Dim3{256, 1, 1});
}

void encode_qsa_prep(Device& dev, const QsaPrepArgs& a, const QsaBuffers& b, bool kv_only, KvFormat fmt) {
  if (a.head_dim == 0 || a.head_dim > kAttnMaxHeadDim)
    bad("attention: head_dim " + std::to_string(a.head_dim) + " (the kernels take 1.." +
        std::to_string(kAttnMaxHeadDim) + ")");
  if (a.rope_dim % 2 != 0 || a.rope_dim > a.head_dim) bad("attention: rope_dim must be even and <= head_dim");
  if (a.n_head_kv == 0 || a.n_head % a.n_head_kv != 0) bad("attention: n_head must be a multiple of n_head_kv");
  if (a.kv_blocks != (a.head_dim + 63) / 64) bad("attention: kv_blocks != ceil(head_dim / 64)");
  if (a.n_rows == 0) return;
  FunctionConstants fc;
  fc.set_bool(kFcKvOnly, kv_only);
  Encoder& e = dev.encoder();
  const bool f32 = fmt == KvFormat::F32;
  e.set_pipeline(dev.pipeline(f32 ? "strata_qsa_prep_f32" : "strata_qsa_prep", fc));
  set_args(e, 0, a);
  e.set_buffer(1, b.q_proj.buffer ? b.q_proj : b.k_proj);
  e.set_buffer(2, b.k_proj);
  e.set_buffer(3, b.v_proj);
  e.set_buffer(4, b.q_norm.buffer ? b.q_norm : b.k_norm);
  e.set_buffer(5, b.k_norm);
  e.set_buffer(6, b.rope_cs);
  e.set_buffer(7, b.qh.buffer ? b.qh : b.k_proj);
  e.set_buffer(8, b.k8);
  e.set_buffer(9, f32 && !b.ks.buffer ? b.k8 : b.ks);
  e.set_buffer(10, b.v8);
  e.set_buffer(11, f32 && !b.vs.buffer ? b.v8 : b.vs);
  const uint32_t slots = 2 * a.n_head_kv + (kv_only ? 0 : a.n_head);
  e.dispatch(Dim3{slots, a.n_rows, 1}, Dim3{32, 1, 1});
}

uint32_t fused_attention_bytes(uint32_t group, uint32_t width) {
  const uint32_t nc = (width + 63) / 64;
  return group * width * 4 + group * nc * 8;
}

bool fused_attention_fits(uint32_t group, uint32_t width) {
  return width <= 384 && fused_attention_bytes(group, width) + 32 <= 32768;
}

AttnPath encode_attention(Device& dev, const AttnArgs& a, const AttnBuffers& b, uint32_t max_width, AttnPath path,
                          KvFormat fmt) {
  if (a.head_dim == 0 || a.head_dim > kAttnMaxHeadDim) bad("attention: head_dim out of range");
  if (a.n_head_kv == 0 || a.n_head % a.n_head_kv != 0) bad("attention: n_head must be a multiple of n_head_kv");
  if (a.n_rows == 0) return path == AttnPath::Auto ? AttnPath::Split : path;
  const uint32_t G = a.n_head / a.n_head_kv;
  const bool fits = fused_attention_fits(G, max_width);
  if (path == AttnPath::Auto) path = fits ? AttnPath::Fused : AttnPath::Split;
  if (path == AttnPath::Fused && !fits)
    bad("attention: the fused kernel takes lists of up to 384 cells whose scores fit in threadgroup memory (width " +
        std::to_string(max_width) + ", " + std::to_string(G) + " heads per KV group)");
  Encoder& e = dev.encoder();
  const BufferRef cells = a.implicit_list ? b.n_cells : b.cells;
  const BufferRef gates = a.gated ? b.gates : b.qh;
  const bool f32 = fmt == KvFormat::F32;
  const BufferRef ks = f32 && !b.ks.buffer ? b.k8 : b.ks, vs = f32 && !b.vs.buffer ? b.v8 : b.vs;
  if (path == AttnPath::Fused) {
    e.set_pipeline(dev.pipeline(f32 ? "strata_attn_fused_f32" : "strata_attn_fused"));
    set_args(e, 0, a);
    e.set_buffer(1, b.qh);
    e.set_buffer(2, b.k8);
    e.set_buffer(3, ks);
    e.set_buffer(4, b.v8);
    e.set_buffer(5, vs);
    e.set_buffer(6, cells);
    e.set_buffer(7, b.n_cells);
    e.set_buffer(8, gates);
    e.set_buffer(9, b.out);
    const uint32_t nc = (max_width + 63) / 64;
    e.set_threadgroup_memory(0, std::max<uint32_t>(G * max_width * 4, 16));
    e.set_threadgroup_memory(1, std::max<uint32_t>(G * nc * 8, 16));
    e.dispatch(Dim3{a.n_head_kv, a.n_rows, 1}, Dim3{256, 1, 1});
    return path;
  }
  const uint32_t nc = (max_width + 63) / 64;
  if (nc > a.n_chunks)
    bad("attention: " + std::to_string(nc) + " chunks exceed the " + std::to_string(a.n_chunks) + " partial planes");
  if (a.plane_stride < a.n_rows) bad("attention: plane stride below the row count");
  if (nc > 0) {
    e.set_pipeline(dev.pipeline(f32 ? "strata_attn_chunks_f32" : "strata_attn_chunks"));
    set_args(e, 0, a);
    e.set_buffer(1, b.qh);
    e.set_buffer(2, b.k8);
    e.set_buffer(3, ks);
    e.set_buffer(4, b.v8);
    e.set_buffer(5, vs);
    e.set_buffer(6, cells);
    e.set_buffer(7, b.n_cells);
    e.set_buffer(8, b.part_o);
    e.set_buffer(9, b.part_ml);
    e.set_threadgroup_memory(0, 64 * 4);
    e.set_threadgroup_memory(1, 2 * 4);
    e.dispatch(Dim3{nc, a.n_head, a.n_rows}, Dim3{64, 1, 1});
    e.barrier();
  }
  e.set_pipeline(dev.pipeline("strata_attn_merge"));
  set_args(e, 0, a);
  e.set_buffer(1, b.part_o.buffer ? b.part_o : b.qh);
  e.set_buffer(2, b.part_ml.buffer ? b.part_ml : b.qh);
  e.set_buffer(3, b.n_cells);
  e.set_buffer(4, gates);
  e.set_buffer(5, b.out);
  e.dispatch(Dim3{a.n_head, a.n_rows, 1}, Dim3{std::min<uint32_t>(a.head_dim, 256), 1, 1});
  return path;
}

void encode_indexer_scores(Device& dev, const CellArgs& a, BufferRef iq, BufferRef iw, BufferRef ik, BufferRef scores,
                           uint32_t max_candidates) {
  if (a.window == 0) bad("indexer: needs a sliding window");
  if (a.n_rows == 0 || max_candidates == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_indexer_scores"));
  set_args(e, 0, a);
  e.set_buffer(1, iq);
  e.set_buffer(2, iw);
  e.set_buffer(3, ik);
  e.set_buffer(4, scores);
  e.dispatch(Dim3{ceil_div(max_candidates, 128), a.n_rows, 1}, Dim3{128, 1, 1});
}

void encode_select_cells(Device& dev, const CellArgs& a, BufferRef scores, BufferRef lists, BufferRef n_cells) {
  if (a.window == 0) bad("cell lists: window 0 means implicit lists");
  if (a.top_k > 1024) bad("cell lists: top_k " + std::to_string(a.top_k) + " (the kernel picks at most 1024)");
  if (a.n_rows == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_select_cells"));
  set_args(e, 0, a);
  e.set_buffer(1, scores.buffer ? scores : lists);
  e.set_buffer(2, lists);
  e.set_buffer(3, n_cells);
  e.set_threadgroup_memory(0, std::max<uint32_t>(a.top_k * 4, 16));
  e.set_threadgroup_memory(1, (2 * (kSelectThreads / 32) + 2) * 4);
  e.dispatch(Dim3{a.n_rows, 1, 1}, Dim3{kSelectThreads, 1, 1});
}

}  // namespace strata::mtl
