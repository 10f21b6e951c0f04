// Model loading: every inconsistency of hyper-parameters or tensors is a Format error naming the
// key or tensor (and the expected versus found shape).
#define STRATA_TEST_MAIN
#include "check.h"

#include <functional>
#include <limits>
#include <string>

#include "strata/cpu/features.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/prepared_model.h"
#include "strata/util/error.h"
#include "test_engine_support.h"

using namespace strata_test;

namespace {

// Loads a tiny model after `edit`; returns the Format error message ("" if it loaded).
std::string load_error(const TinyOptions& o, const std::function<void(MemorySource&)>& edit) {
  auto src = tiny_source(o);
  edit(*src);
  try {
    strata::model::Model::from_source(std::move(src));
  } catch (const strata::Error& e) {
    if (e.kind() != strata::ErrorKind::Format) return std::string("wrong kind: ") + e.what();
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

#define CHECK_LOAD_ERROR(opts, edit, ...)                                                                      \
  do {                                                                                                         \
    const std::string _msg = load_error(opts, edit);                                                           \
    CHECK_MSG(!_msg.empty(), "expected a Format error");                                                       \
    for (const char* _part : {__VA_ARGS__}) CHECK_MSG(contains(_msg, _part), _msg + " lacks '" + _part + "'"); \
  } while (0)

}  // namespace

TEST(valid_models_load) {
  CHECK(load_error(TinyOptions{}, [](MemorySource&) {}).empty());
  TinyOptions q;
  q.qwen3moe = true;
  CHECK(load_error(q, [](MemorySource&) {}).empty());
  // qwen3moe without output.weight ties the head to the embeddings.
  auto src = tiny_source(q);
  src->erase("output.weight");
  auto m = strata::model::Model::from_source(std::move(src));
  CHECK(m->output.data == m->tok_embd.data);
}

TEST(architecture_and_keys) {
  TinyOptions o;
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_s("general.architecture", "llama"); }, "'llama'", "not supported");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.erase("general.architecture"); }, "general.architecture");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.erase("strata.embedding_length"); }, "strata.embedding_length", "missing");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.erase("strata.rope.freq_base"); }, "strata.rope.freq_base");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.attention.head_count_kv", 3); }, "attention.head_count", "multiple of",
      "head_count_kv = 3");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.attention.value_length", 8); }, "attention.value_length = 8",
      "key_length = 16");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_u("strata.rope.dimension_count", 7); }, "rope.dimension_count = 7");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.rope.dimension_count", 18); }, "rope.dimension_count = 18",
      "<= attention.key_length = 16");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.expert_used_count", 7); }, "expert_used_count = 7", "expert_count = 6");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_u("strata.nextn_predict_layers", 2); }, "nextn_predict_layers");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_u("strata.block_count", 1); }, "block_count");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.hyper_connection.sinkhorn_iterations", 0); }, "sinkhorn_iterations");
  // A per-row loop count no tensor bounds is capped (no hang on a hostile file).
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.hyper_connection.sinkhorn_iterations", 4000000000ull); },
      "sinkhorn_iterations = 4000000000");
  // Sink, window and top-T larger than any context are fine (lists are bounded by the cells).
  CHECK(load_error(o, [](MemorySource& s) {
          s.set_u("strata.attention.indexer.top_k", 4000000000ull);
          s.set_u("strata.attention.sink_count", 4000000000ull);
        }).empty());
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_u("strata.embedding_length", 1ull << 33); }, "does not fit");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_u("strata.nextn.vocab_size", 100); }, "nextn.vocab_size = 100");
  TinyOptions q;
  q.qwen3moe = true;
  CHECK_LOAD_ERROR(q, [](MemorySource& s) { s.set_u("qwen3moe.expert_used_count", 9); }, "qwen3moe.expert_used_count");
}

// Floats that load but make every output garbage (an inf rope base turns each angle into NaN).
TEST(non_finite_float_hparams_refused) {
  TinyOptions o;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_LOAD_ERROR(
      o, [&](MemorySource& s) { s.set_f("strata.rope.freq_base", inf); }, "strata.rope.freq_base = inf", "finite");
  CHECK_LOAD_ERROR(
      o, [&](MemorySource& s) { s.set_f("strata.rope.freq_base", nan); }, "strata.rope.freq_base", "finite");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_f("strata.rope.freq_base", 0.0f); }, "rope.freq_base = 0", "> 0");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.set_f("strata.rope.freq_base", -5.0f); }, "rope.freq_base = -5");
  CHECK_LOAD_ERROR(
      o, [&](MemorySource& s) { s.set_f("strata.attention.layer_norm_rms_epsilon", inf); },
      "layer_norm_rms_epsilon = inf");
  CHECK_LOAD_ERROR(
      o, [&](MemorySource& s) { s.set_f("strata.hyper_connection.epsilon", nan); }, "hyper_connection.epsilon");
  CHECK(load_error(o, [](MemorySource& s) { s.set_f("strata.attention.layer_norm_rms_epsilon", 0.0f); }).empty());
}

TEST(tensor_shapes_and_presence) {
  TinyOptions o;
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.erase("blk.1.attn_k.weight"); }, "blk.1.attn_k.weight", "missing");
  // Mis-shaped: expected vs found, numpy order.
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.add_f32("blk.0.attn_v.weight", {16, 32}, std::vector<float>(16 * 32)); },
      "blk.0.attn_v.weight", "shape [16, 32]", "expected [32, 32]");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.add_f32("blk.0.ffn_down_exps.weight", {6, 24, 32}, std::vector<float>(6 * 24 * 32)); },
      "blk.0.ffn_down_exps.weight", "expected [6, 32, 24]");
  // hc tensors present with n = 1 / absent with n > 1.
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.hyper_connection.count", 1); }, "hc_fn.weight", "present",
      "hyper_connection.count = 1");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.erase("blk.1.hc_ffn_base.weight"); }, "blk.1.hc_ffn_base.weight", "missing");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.erase("output_hc_scale.weight"); }, "output_hc_scale.weight");
  // Indexer / shared expert presence follow their keys.
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.attention.indexer.head_count", 0); }, "indexer.attn_q.weight",
      "present");
  CHECK_LOAD_ERROR(o, [](MemorySource& s) { s.erase("blk.0.indexer.weights.weight"); }, "blk.0.indexer.weights.weight");
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.set_u("strata.expert_shared_feed_forward_length", 0); }, "ffn_gate_shexp.weight",
      "present");
  // The MTP block never carries indexer tensors.
  CHECK_LOAD_ERROR(
      o, [](MemorySource& s) { s.add_f32("blk.2.indexer.attn_k.weight", {8, 32}, std::vector<float>(256)); },
      "blk.2.indexer.attn_k.weight", "MTP");
  // Norms must be F32; vocab_ids must be I32 in range.
  CHECK_LOAD_ERROR(
      o,
      [](MemorySource& s) {
        s.add_f32("blk.0.ffn_norm.weight", {32}, std::vector<float>(32), strata::quant::GGMLType::F16);
      },
      "blk.0.ffn_norm.weight", "F16", "expected F32");
  CHECK_LOAD_ERROR(
      o,
      [](MemorySource& s) {
        std::vector<int32_t> ids(23, 0);
        ids[5] = 61;
        s.add_i32("blk.2.nextn.vocab_ids", ids);
      },
      "vocab_ids[5] = 61");
  // MTP tensors without the key.
  CHECK_LOAD_ERROR(
      o,
      [](MemorySource& s) {
        s.set_u("strata.nextn_predict_layers", 0);
        s.set_u("strata.block_count", 2);
      },
      "fc_hidden.weight", "nextn_predict_layers = 0");
  // An F16 matrix is fine.
  TinyOptions h;
  h.matrix_type = strata::quant::GGMLType::F16;
  CHECK(load_error(h, [](MemorySource&) {}).empty());
  // qwen3moe refuses shared-expert tensors.
  TinyOptions q;
  q.qwen3moe = true;
  CHECK_LOAD_ERROR(
      q, [](MemorySource& s) { s.add_f32("blk.0.ffn_gate_shexp.weight", {8, 32}, std::vector<float>(256)); },
      "shared expert");
}

// kv_type auto on the cpu backend (engine::auto_cpu_kv_type): fp16 for qwen3moe / glm4moe, whose own
// cells are f32, on a processor that runs the avx2 path (its attention kernels read fp16 with F16C),
// decided by the hardware and not the active path; every other model keeps its own type.
TEST(auto_kv_type_on_the_cpu_backend) {
  using strata::model::Arch;
  using strata::model::KvType;
  const bool avx2 = strata::cpu::isa_supported(strata::cpu::Isa::Avx2);
  const KvType want = avx2 ? KvType::F16 : KvType::F32;
  TinyOptions q;
  q.qwen3moe = true;
  const auto qwen = strata::model::Model::from_source(tiny_source(q));
  CHECK(qwen->hparams().kv_type == KvType::F32);  // the architecture's own, as loaded
  CHECK(strata::engine::auto_cpu_kv_type(qwen->hparams()) == want);
  const strata::cpu::Isa before = strata::cpu::active_isa();
  strata::cpu::force_isa(strata::cpu::Isa::Scalar);  // a forced lower path keeps the cells
  CHECK(strata::engine::auto_cpu_kv_type(qwen->hparams()) == want);
  strata::cpu::force_isa(before);
  strata::model::HParams hp = qwen->hparams();
  hp.arch = Arch::Glm4Moe;
  CHECK(strata::engine::auto_cpu_kv_type(hp) == want);
  hp.head_dim = strata::engine::kMaxF16HeadDim + 2;  // heads fp16 cells do not take stay f32
  CHECK(strata::engine::auto_cpu_kv_type(hp) == KvType::F32);
  const auto own = strata::model::Model::from_source(tiny_source(TinyOptions{}));  // the strata format
  CHECK(own->hparams().kv_type == KvType::Int8 && strata::engine::auto_cpu_kv_type(own->hparams()) == KvType::Int8);
  hp = qwen->hparams();
  hp.arch = Arch::DeepSeek4;  // compressed f32 cells, never another type
  CHECK(strata::engine::auto_cpu_kv_type(hp) == KvType::F32);
}
