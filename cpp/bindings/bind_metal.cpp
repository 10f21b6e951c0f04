// strata._strata.MetalEngine: a model run through the Metal kernels and dispatch plan
// (metal/host/metal_model.h) on the threadgroup emulator ("metal-emu", every platform, slowly) or
// the GPU ("metal", macOS with metal-cpp). strata._strata.metal_backend() reads STRATA_BACKEND.
// Compute releases the GIL; a mutex serialises calls on one engine.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "metal/host/backend.h"
#include "metal/host/metal_model.h"
#include "metal/host/tiles.h"
#include "strata/model/model.h"
#include "strata/util/error.h"

namespace py = pybind11;

namespace strata::bindings {
namespace {

class PyMetalEngine {
 public:
  PyMetalEngine(const std::string& path, const std::string& backend, int64_t max_ctx, int max_rows, int64_t mtp_sink,
                int64_t mtp_window, bool encode_mtp, const std::string& metallib) {
    const mtl::Backend b = mtl::parse_backend(backend);
    if (b == mtl::Backend::Cpu) throw_error(ErrorKind::Config, "MetalEngine: backend must be metal-emu or metal");
    backend_ = mtl::backend_name(b);
    mtl::MetalModelConfig cfg;
    cfg.max_ctx = max_ctx;
    cfg.max_rows = max_rows;
    cfg.mtp_sink = mtp_sink;
    cfg.mtp_window = mtp_window;
    cfg.encode_mtp = encode_mtp;
    cfg.drafter_tiles = mtl::drafter_tiles_from_env();
    py::gil_scoped_release release;
    model_ = model::Model::load(path);
    device_ = mtl::create_device(b, metallib);
    engine_ = std::make_unique<mtl::MetalModel>(*device_, *model_, cfg);
  }

  py::array_t<float> eval(const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& tokens,
                          py::object start_pos) {
    std::lock_guard<std::mutex> lock(mu_);
    if (tokens.ndim() != 1 || tokens.shape(0) < 1) throw_error(ErrorKind::Value, "eval: tokens must be a 1-D non-empty array");
    std::vector<int32_t> t(static_cast<size_t>(tokens.shape(0)));
    for (size_t i = 0; i < t.size(); ++i) {
      const int64_t v = tokens.at(static_cast<py::ssize_t>(i));
      if (v < 0 || v > INT32_MAX) throw_error(ErrorKind::Value, "eval: token " + std::to_string(v) + " is out of range");
      t[i] = static_cast<int32_t>(v);
    }
    const int64_t start = start_pos.is_none() ? engine_->n_past() : start_pos.cast<int64_t>();
    py::array_t<float> out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(model_->hparams().n_vocab)});
    float* o = out.mutable_data();
    {
      py::gil_scoped_release release;
      engine_->eval(t.data(), static_cast<int64_t>(t.size()), start, o);
    }
    return out;
  }

  py::tuple mtp_draft(int32_t next_token, int n_steps) {
    std::lock_guard<std::mutex> lock(mu_);
    if (n_steps < 1 || n_steps > 64) throw_error(ErrorKind::Value, "mtp_draft: n_steps must be 1..64");
    const int64_t Vr = model_->hparams().mtp_vocab;
    py::array_t<float> logits(std::vector<py::ssize_t>{n_steps, static_cast<py::ssize_t>(Vr)});
    py::array_t<int32_t> toks(std::vector<py::ssize_t>{n_steps});
    float* l = logits.mutable_data();
    int32_t* tk = toks.mutable_data();
    {
      py::gil_scoped_release release;
      engine_->mtp_draft(engine_->n_past() - 1, next_token, n_steps, l, tk);
    }
    return py::make_tuple(logits, toks);
  }

  int64_t n_past() const { return engine_->n_past(); }
  int64_t max_ctx() const { return engine_->max_ctx(); }
  bool has_mtp() const { return engine_->has_mtp(); }
  const std::string& backend() const { return backend_; }

 private:
  std::string backend_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<mtl::Device> device_;
  std::unique_ptr<mtl::MetalModel> engine_;
  std::mutex mu_;
};

}  // namespace

void bind_metal(py::module_& m) {
  m.def("metal_backend", [] { return std::string(mtl::backend_name(mtl::backend_from_env())); },
        "STRATA_BACKEND, validated: 'cpu' (default), 'metal-emu' or 'metal'");
  py::class_<PyMetalEngine>(m, "MetalEngine",
                            "A model through the Metal kernels: backend 'metal-emu' (the threadgroup emulator, any "
                            "platform, slow) or 'metal' (macOS with metal-cpp)")
      .def(py::init<const std::string&, const std::string&, int64_t, int, int64_t, int64_t, bool, const std::string&>(),
           py::arg("path"), py::arg("backend") = "metal-emu", py::arg("max_ctx") = 0, py::arg("max_rows") = 32,
           py::arg("mtp_sink") = 64, py::arg("mtp_window") = 256, py::arg("encode_mtp") = true,
           py::arg("metallib") = "")
      .def("eval", &PyMetalEngine::eval, py::arg("tokens"), py::arg("start_pos") = py::none(),
           "Run tokens at start_pos (default n_past); returns the last row's logits [V]")
      .def("mtp_draft", &PyMetalEngine::mtp_draft, py::arg("next_token"), py::arg("n_steps") = 1,
           "Chained draft steps from the last evaluated position; returns (logits [n_steps, Vr], token ids)")
      .def_property_readonly("n_past", &PyMetalEngine::n_past)
      .def_property_readonly("max_ctx", &PyMetalEngine::max_ctx)
      .def_property_readonly("has_mtp", &PyMetalEngine::has_mtp)
      .def_property_readonly("backend", &PyMetalEngine::backend);
}

}  // namespace strata::bindings
