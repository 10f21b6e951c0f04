// Model inspection without an engine: the validated hyper-parameters and whether the file has an MTP
// layer. strata.Model probes a file with it; an engine would repack weights at load and so read every
// expert byte (on a big model, the whole file) just to answer these questions.
#include "bindings/hparams_dict.h"

#include "bindings/bindings.h"
#include "strata/model/model.h"

namespace py = pybind11;

namespace strata::bindings {

pybind11::dict hparams_dict(const model::HParams& h) {
  py::dict d;
  d["arch"] = h.arch_name;
  d["context_length"] = h.context_length;
  d["embedding_length"] = h.n_embd;
  d["vocab_size"] = h.n_vocab;
  d["block_count"] = h.n_block;
  d["layers"] = h.n_layer;
  d["nextn_predict_layers"] = h.n_nextn;
  d["head_count"] = h.n_head;
  d["head_count_kv"] = h.n_head_kv;
  d["key_length"] = h.head_dim;
  d["layer_norm_rms_epsilon"] = h.rms_eps;
  d["gated"] = h.attn_gated;
  d["sink_count"] = h.sink_count;
  d["sliding_window"] = h.sliding_window;
  d["indexer_head_count"] = h.indexer_heads;
  d["indexer_key_length"] = h.indexer_dim;
  d["indexer_top_k"] = h.indexer_top_k;
  d["rope_freq_base"] = h.rope_base;
  d["rope_dimension_count"] = h.rope_dim;
  d["expert_count"] = h.n_expert;
  d["expert_used_count"] = h.n_expert_used;
  d["expert_feed_forward_length"] = h.ff_expert;
  d["expert_shared_feed_forward_length"] = h.ff_shared;
  d["hyper_connection_count"] = h.hc_count;
  d["hyper_connection_sinkhorn_iterations"] = h.hc_sinkhorn_iters;
  d["hyper_connection_epsilon"] = h.hc_eps;
  d["nextn_vocab_size"] = h.mtp_vocab;
  d["kv_type"] = model::kv_type_name(h.kv_type);
  return d;
}

void bind_inspect(py::module_& m) {
  m.def(
      "inspect_model",
      [](const std::string& path, const std::string& mtp_model) {
        std::unique_ptr<model::Model> model;
        {
          py::gil_scoped_release release;
          model = model::Model::from_source(model::open_gguf_source(path, MmapFile::Access::Random));
          if (!mtp_model.empty()) model->attach_mtp_file(mtp_model);
        }
        py::dict d;
        d["hparams"] = hparams_dict(model->hparams());
        d["has_mtp"] = model->mtp.has_value();
        return d;
      },
      py::arg("path"), py::arg("mtp_model") = "",
      "Open and validate a model file as an engine would (hyper-parameters, every tensor's name, type and "
      "shape), without building an engine: no weights are repacked or read. Returns {'hparams': dict (as "
      "Engine.hparams), 'has_mtp': bool}. mtp_model: a deepseek4 model's separate MTP file (llama.cpp's "
      "mtp-*.gguf), checked against the model. Raises FormatError / IOError as Engine(path) does.");
}

}  // namespace strata::bindings
