// strata._strata.MetalEngine: a model run through the Metal kernels and dispatch plan
// (metal/host/metal_model.h) on the threadgroup emulator ("metal-emu", every platform, slowly) or
// the GPU ("metal", macOS with metal-cpp). It is a session backend: the same methods and properties
// strata.Session uses on _strata.Engine (eval with last/all/no logits and draft rows, rollback,
// commit, checkpoint/restore, final_streams, mtp_draft, mtp_cell_valid, expert_stats, spec_round),
// so `Config(backend="metal-emu")` runs whole sessions. strata._strata.metal_backend() reads
// STRATA_BACKEND. Compute releases the GIL; a mutex serialises calls on one engine.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "bindings/spec_round.h"
#include "metal/emu/emu_device.h"
#include "metal/host/backend.h"
#include "metal/host/metal_model.h"
#include "metal/host/tiles.h"
#include "strata/model/drafter_requant.h"
#include "strata/model/model.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace py = pybind11;

namespace strata::bindings {
namespace {

using engine::LogitRows;

struct PyMetalCheckpoint {
  mtl::MetalCheckpoint cp;
};

// The expert-store counters of _strata.Engine.expert_stats(), all zero: the Metal path reads every
// routed expert from the mapped weights (no resident set, nothing streamed).
py::dict zero_counters() {
  py::dict d;
  for (const char* k : {"windows", "rows", "hits", "misses", "prefetch_hits", "bytes_read", "io_bytes", "evictions"})
    d[k] = 0;
  d["stall_s"] = 0.0;
  return d;
}

class PyMetalEngine {
 public:
  PyMetalEngine(const std::string& path, const std::string& backend, int64_t max_ctx, int max_rows, int64_t mtp_sink,
                int64_t mtp_window, bool encode_mtp, const std::string& metallib,
                std::optional<routing::MoceParams> moce, int n_threads, const py::object& mtp_requant) {
    const mtl::Backend b = mtl::parse_backend(backend);
    if (b == mtl::Backend::Cpu) throw_error(ErrorKind::Config, "MetalEngine: backend must be metal-emu or metal");
    if (n_threads < 0 || n_threads > 1024)
      throw_error(ErrorKind::Value, "MetalEngine: n_threads = " + std::to_string(n_threads) + " must be in [0, 1024]");
    backend_ = mtl::backend_name(b);
    max_rows_ = max_rows;
    mtl::MetalModelConfig cfg;
    cfg.max_ctx = max_ctx;
    cfg.max_rows = max_rows;
    cfg.mtp_sink = mtp_sink;
    cfg.mtp_window = mtp_window;
    cfg.encode_mtp = encode_mtp;
    cfg.drafter_tiles = mtl::drafter_tiles_from_env();
    if (moce) cfg.moce = *moce;
    const model::DrafterRequant rq = mtp_requant.is_none()
                                         ? model::DrafterRequant::Off
                                         : model::parse_drafter_requant(py::str(mtp_requant).cast<std::string>());
    py::gil_scoped_release release;
    model_ = model::Model::load(path);
    // R-11 before the device wraps the drafter's weights (the Q4_0 / Q5_0 GEMVs run as any other).
    model::requant_drafter(*model_, rq, &ThreadPool::global());
    if (b == mtl::Backend::MetalEmu) {
      // Threadgroups on a pool (results do not depend on scheduling): the shared one, or n_threads.
      emu::Options opt;
      if (n_threads == 1) {
        opt.pool = nullptr;
      } else if (n_threads > 1) {
        own_pool_ = std::make_unique<ThreadPool>(n_threads);
        opt.pool = own_pool_.get();
      } else {
        opt.pool = &ThreadPool::global();
      }
      device_ = std::make_unique<mtl::EmuDevice>(opt);
    } else {
      device_ = mtl::create_device(b, metallib);
    }
    engine_ = std::make_unique<mtl::MetalModel>(*device_, *model_, cfg);
  }

  const model::HParams& hp() const { return model_->hparams(); }

  py::object eval(const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& tokens,
                  std::optional<int64_t> start_pos, const std::string& logits, std::optional<int64_t> draft_from_row) {
    return eval_target(*engine_, mu_, tokens, start_pos, logits, draft_from_row);
  }

  py::array_t<float> final_streams(int64_t pos) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pos < 0) pos += engine_->n_past();
    return held_streams(engine_->streams_at(pos), pos, hp().hc_count, hp().n_embd);
  }

  // Drafts from the held streams of `pos` (default n_past - 1): the Metal model keeps no copy of
  // arbitrary streams, so unlike Engine.mtp_draft there is no `streams` argument.
  py::tuple mtp_draft(int64_t next_token, int n_steps, std::optional<int64_t> pos) {
    check_draft_args(*engine_, next_token, n_steps);
    const int64_t Vr = hp().mtp_vocab;
    py::array_t<float> logits(std::vector<py::ssize_t>{n_steps, static_cast<py::ssize_t>(Vr)});
    py::array_t<int32_t> toks(std::vector<py::ssize_t>{n_steps});
    float* l = logits.mutable_data();
    int32_t* tk = toks.mutable_data();
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t p = pos ? *pos : engine_->n_past() - 1;
      engine_->mtp_draft(p, static_cast<int32_t>(next_token), n_steps, l, tk);
    }
    return py::make_tuple(logits, toks);
  }

  py::array_t<int32_t> mtp_vocab_ids() const { return draft_vocab_array(*engine_); }

  void commit(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    engine_->commit(n);
  }
  void rollback(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    engine_->rollback(n);
  }
  PyMetalCheckpoint checkpoint() {
    std::lock_guard<std::mutex> lock(mu_);
    return PyMetalCheckpoint{engine_->checkpoint()};
  }
  void restore(const PyMetalCheckpoint& cp) {
    std::lock_guard<std::mutex> lock(mu_);
    engine_->restore(cp.cp);  // refuses another engine's checkpoint (Value)
  }
  bool mtp_cell_valid(int64_t c) {
    std::lock_guard<std::mutex> lock(mu_);
    return engine_->mtp_cell_valid(c);
  }

  py::dict expert_stats() const {
    const model::HParams& h = hp();
    const uint64_t layers = h.n_layer + (model_->mtp ? 1u : 0u);
    py::dict d;
    d["mode"] = "mmap";
    d["io"] = backend_ + ": every routed expert from the mapped weights (no expert store on this backend)";
    d["direct_io"] = false;
    d["io_threads"] = 0;
    d["layers"] = layers;
    d["experts_per_layer"] = h.n_expert;
    d["total_experts"] = layers * h.n_expert;
    d["expert_bytes_total"] = 0;
    d["slots"] = 0;
    d["slot_bytes"] = 0;
    d["capacity_bytes"] = 0;
    d["resident"] = layers * h.n_expert;
    d["resident_bytes"] = 0;
    d["total"] = zero_counters();
    d["last_window"] = zero_counters();
    return d;
  }

  py::dict draft_stats() {
    std::lock_guard<std::mutex> lock(mu_);
    const draft::DraftCells& c = engine_->draft_cells();
    py::dict d;
    d["sink_end"] = c.sink_end();
    d["run_begin"] = c.run_begin();
    d["run_end"] = c.run_end();
    d["rows_checked"] = engine_->ledger().rows_checked();
    d["reads_checked"] = engine_->ledger().reads_checked();
    return d;
  }

  mtl::MetalModel& model() { return *engine_; }
  engine::DecodeTarget& target() { return *engine_; }
  SpecState& spec_state() { return spec_; }
  std::mutex& mutex() { return mu_; }
  const std::string& backend() const { return backend_; }
  int max_rows() const { return max_rows_; }

 private:
  std::string backend_;
  int max_rows_ = 0;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<ThreadPool> own_pool_;
  std::unique_ptr<mtl::Device> device_;
  std::unique_ptr<mtl::MetalModel> engine_;
  std::mutex mu_;
  SpecState spec_;  // after engine_: its speculator refers to the model
};

}  // namespace

void bind_metal(py::module_& m) {
  m.def("metal_backend", [] { return std::string(mtl::backend_name(mtl::backend_from_env())); },
        "STRATA_BACKEND, validated: 'cpu' (default), 'metal-emu' or 'metal'");
  m.def("metal_device_available", [] {
#if defined(STRATA_HAVE_METAL_DEVICE)
    return true;
#else
    return false;
#endif
  }, "Whether this build can run the 'metal' backend (macOS with metal-cpp); 'metal-emu' runs everywhere");
  py::class_<PyMetalCheckpoint>(m, "MetalEngineCheckpoint", "Opaque state of a MetalEngine (lengths and write stamps)")
      .def_property_readonly("n_past", [](const PyMetalCheckpoint& c) { return c.cp.n_past; })
      .def_property_readonly("n_committed", [](const PyMetalCheckpoint& c) { return c.cp.n_committed; });
  py::class_<PyMetalEngine> cls(m, "MetalEngine",
                                "A GGUF model (strata or qwen3moe) through the Metal kernels: backend 'metal-emu' (the "
                                "threadgroup emulator, any platform, slow) or 'metal' (macOS with metal-cpp). The same "
                                "session interface as Engine.");
  cls.def(py::init<const std::string&, const std::string&, int64_t, int, int64_t, int64_t, bool, const std::string&,
                   std::optional<routing::MoceParams>, int, const py::object&>(),
          py::arg("path"), py::arg("backend") = "metal-emu", py::arg("max_ctx") = 0, py::arg("max_rows") = 32,
          py::arg("mtp_sink") = 64, py::arg("mtp_window") = 256, py::arg("encode_mtp") = true,
          py::arg("metallib") = "", py::arg("moce") = py::none(), py::arg("n_threads") = 0,
          py::arg("mtp_requant") = py::none(),
          "max_ctx: cells (0 = min(context_length, 4096)); max_rows: rows per chunk; moce: decode.MoceParams of the "
          "main window's routing (no residency map on this backend: plain top-K); n_threads: the emulator's "
          "threadgroup pool (0 = the shared pool, 1 = the calling thread); mtp_requant: 'q4' / 'q5' drafter weights (R-11)")
      .def_property_readonly("arch", [](const PyMetalEngine& e) { return e.hp().arch_name; })
      .def_property_readonly("vocab_size", [](const PyMetalEngine& e) { return e.hp().n_vocab; })
      .def_property_readonly("max_ctx", [](PyMetalEngine& e) { return e.model().max_ctx(); })
      .def_property_readonly("max_rows", [](PyMetalEngine& e) { return e.max_rows(); })
      .def_property_readonly("n_past", [](PyMetalEngine& e) { return e.model().n_past(); })
      .def_property_readonly("n_committed", [](PyMetalEngine& e) { return e.model().n_committed(); })
      .def_property_readonly("has_mtp", [](PyMetalEngine& e) { return e.model().has_mtp(); })
      .def_property_readonly("mtp_vocab_ids", &PyMetalEngine::mtp_vocab_ids)
      .def_property_readonly("backend", &PyMetalEngine::backend)
      .def("eval", &PyMetalEngine::eval, py::arg("tokens"), py::arg("start_pos") = py::none(),
           py::arg("logits") = "last", py::arg("draft_from_row") = py::none(),
           "Run tokens at positions start_pos.. (default n_past; start_pos <= n_past). Returns float32 logits: "
           "[V] for logits='last', [n, V] for 'all', None for 'none'. draft_from_row: rows >= it are draft rows of "
           "a verification window; None = no draft rows.")
      .def("commit", &PyMetalEngine::commit, py::arg("n"), "Keep exactly n cells and mark them committed")
      .def("rollback", &PyMetalEngine::rollback, py::arg("n"), "Drop back to n cells (n <= n_past)")
      .def("checkpoint", &PyMetalEngine::checkpoint)
      .def("restore", &PyMetalEngine::restore, py::arg("checkpoint"))
      .def("final_streams", &PyMetalEngine::final_streams, py::arg("pos") = -1,
           "Final main-model streams [n, d] (before the HyperHead) of a position of the last eval")
      .def("mtp_draft", &PyMetalEngine::mtp_draft, py::arg("next_token"), py::arg("n_steps") = 1,
           py::arg("pos") = py::none(),
           "Chained MTP draft from the held streams of position pos (default n_past-1) and the token at pos+1. "
           "Returns (logits [n_steps, Vr] over the restricted vocabulary, token ids [n_steps]).")
      .def("mtp_cell_valid", &PyMetalEngine::mtp_cell_valid, py::arg("cell"))
      .def("expert_stats", &PyMetalEngine::expert_stats,
           "The dict shape of Engine.expert_stats(); counters are zero (no expert store on this backend)")
      .def("reset_expert_stats", [](PyMetalEngine&) {})
      .def("draft_stats", &PyMetalEngine::draft_stats,
           "The drafter's cell bookkeeping (sink_end, run_begin, run_end) and the ledger's checked rows/reads");
  def_spec_round(cls);
}

}  // namespace strata::bindings
