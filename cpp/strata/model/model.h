#pragma once
// A loaded model: validated hyper-parameters plus weight views into the source's memory (no
// copies). Built per architecture by bind_strata / bind_qwen3moe / bind_glm4moe; immutable after load and safe
// to share between windows.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/model/ds4_weights.h"
#include "strata/model/hparams.h"
#include "strata/model/model_source.h"
#include "strata/model/weights.h"
#include "strata/util/aligned.h"

namespace strata::model {

class TensorBinder;

class Model {
 public:
  // Opens a GGUF file and binds it; mtp_path (deepseek4 only, may be empty): llama.cpp's separate
  // MTP file of the same model, bound as the drafter (attach_mtp_file).
  static std::unique_ptr<Model> load(const std::string& path, const std::string& mtp_path = {});
  // Binds an already opened source (tests build sources in memory). Takes ownership.
  static std::unique_ptr<Model> from_source(std::unique_ptr<ModelSource> src);

  // deepseek4: binds llama.cpp's separate MTP file (block L = n_layer with nextn.* tensors and the
  // MTP's own output_hc_* head; docs/models.md) as this model's drafter, after checking that it is
  // this model's (architecture, sizes, block_count = n_layer + 1, nextn_predict_layers = 1): a
  // Format error naming the file otherwise. Before any Window / Mtp is built.
  void attach_mtp_file(const std::string& path);
  // The same over an opened source (tests build sources in memory). Takes ownership.
  void attach_mtp_source(std::unique_ptr<ModelSource> src);

  const HParams& hparams() const { return hp_; }
  const ModelSource& source() const { return *src_; }

  // The kv_type setting (STRATA_KV_TYPE): store the K/V cells of windows and drafters built from now
  // on as `t` instead of the architecture's own type. Before any Window / Mtp is built. deepseek4
  // keeps its compressed cells of its own: a Config error there unless `t` is its type already.
  void set_kv_type(KvType t);
  // Called by every Window / Mtp as it builds its cells: a later set_kv_type is an Internal error
  // (the cells built already would keep the old type while hparams() reported the new one).
  void note_cells_built() const { cells_built_ = true; }

  Weight tok_embd;  // [V, d]
  Weight output;    // [V, d] (qwen3moe without output.weight: token_embd, tied)
  // The main head's repacked copy (model/weight_repack.cpp), read by the logits GEMV; absent = output.
  // `output` itself stays in the file's format: the drafter's restricted-vocab head reads its rows.
  Weight output_repacked;
  const Weight& logits_head() const { return output_repacked.present() ? output_repacked : output; }
  const float* output_norm = nullptr;
  HyperHeadWeights head_hc;  // absent when n = 1
  std::vector<LayerWeights> layers;
  std::optional<MtpWeights> mtp;              // when nextn_predict_layers = 1
  std::vector<Ds4AttentionWeights> ds4_attn;  // deepseek4: one per main layer (layers[l].attn holds only its norm)
  std::optional<Ds4MtpWeights> ds4_mtp;       // deepseek4 with its MTP file: the MTP block's attention (mtp->block)
  // The MTP file's source when the drafter comes from a separate file (its weights map it).
  const ModelSource* mtp_source() const { return mtp_src_.get(); }
  // Weight bytes made at load rather than mapped (drafter requant, model/drafter_requant.h); views
  // above may point into them. Filled before any Window/Mtp is built, never afterwards.
  std::vector<AlignedBuffer<uint8_t>> owned_weights;
  // The ids 0 .. V-1 in an owned buffer: the vocab_ids of an MTP head over the whole vocabulary.
  const int32_t* owned_identity_ids(int64_t V);

 private:
  Model() = default;
  HParams hp_;
  mutable std::atomic<bool> cells_built_{false};
  std::unique_ptr<ModelSource> src_;
  std::unique_ptr<ModelSource> mtp_src_;

  friend void bind_strata(Model& m);
  friend void bind_qwen3moe(Model& m);
  friend void bind_glm4moe(Model& m);
  friend void bind_deepseek4(Model& m);
  friend void bind_glm4moe_nextn(Model& m, TensorBinder& b);
  friend void bind_deepseek4_mtp(Model& m, std::unique_ptr<ModelSource> src);
};

void bind_strata(Model& m);
void bind_qwen3moe(Model& m);
void bind_glm4moe(Model& m);
void bind_deepseek4(Model& m);
// deepseek4's MTP file (Model::attach_mtp_file); model/deepseek4_arch.cpp.
void bind_deepseek4_mtp(Model& m, std::unique_ptr<ModelSource> src);

}  // namespace strata::model
