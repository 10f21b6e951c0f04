#include "strata/model/model.h"

#include <string>
#include <utility>

#include "strata/util/error.h"

namespace strata::model {

const int32_t* Model::owned_identity_ids(int64_t V) {
  AlignedBuffer<uint8_t> buf(static_cast<std::size_t>(V) * sizeof(int32_t));
  int32_t* ids = reinterpret_cast<int32_t*>(buf.data());
  for (int64_t i = 0; i < V; ++i) ids[i] = static_cast<int32_t>(i);
  owned_weights.push_back(std::move(buf));
  return ids;
}

void Model::set_kv_type(KvType t) {
  if (t == hp_.kv_type) return;
  if (cells_built_) throw_error(ErrorKind::Internal, "Model::set_kv_type: K/V cells of this model were built already");
  if (hp_.arch == Arch::DeepSeek4)
    throw_error(ErrorKind::Config, std::string("kv_type ") + kv_type_name(t) +
                                       ": deepseek4 keeps its compressed K/V cells in f32 (kv_type auto or f32)");
  hp_.kv_type = t;
}

std::unique_ptr<Model> Model::from_source(std::unique_ptr<ModelSource> src) {
  if (!src) throw_error(ErrorKind::Value, "Model::from_source: null source");
  std::unique_ptr<Model> m(new Model());
  m->hp_ = read_hparams(*src);
  m->src_ = std::move(src);
  switch (m->hp_.arch) {
    case Arch::Strata: bind_strata(*m); break;
    case Arch::Qwen3Moe: bind_qwen3moe(*m); break;
    case Arch::Glm4Moe: bind_glm4moe(*m); break;
    case Arch::DeepSeek4: bind_deepseek4(*m); break;
  }
  return m;
}

void Model::attach_mtp_source(std::unique_ptr<ModelSource> src) {
  if (!src) throw_error(ErrorKind::Value, "Model::attach_mtp_source: null source");
  bind_deepseek4_mtp(*this, std::move(src));
}

}  // namespace strata::model
