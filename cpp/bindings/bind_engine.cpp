// strata._strata.Engine: one sequence (engine/sequence.h) through a model's main window and MTP
// drafter on a backend chosen with backend=: "cpu" (engine::Runner: Window + Mtp over an expert
// store), "metal-emu" (the Metal kernels and dispatch plan on the threadgroup emulator, any platform,
// slowly) or "metal" (the GPU, macOS with metal-cpp). Every backend answers the same methods, so
// strata.Session and the tests use one class. Its settings come once, with the engine, as one typed
// config::Settings (strata.Config.native(), bind_settings.cpp); a round gets none.
// Compute releases the GIL; a mutex serialises concurrent calls from several Python threads.
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
#include "bindings/hparams_dict.h"
#include "bindings/spec_round.h"
#include "metal/emu/emu_device.h"
#include "metal/host/backend.h"
#include "metal/host/metal_model.h"
#include "metal/host/tiles.h"
#include "strata/config/settings.h"
#include "strata/cpu/repack/repack.h"
#include "strata/engine/runner.h"
#include "strata/experts/expert_store.h"
#include "strata/model/drafter_requant.h"
#include "strata/model/model.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace py = pybind11;

namespace strata::bindings {
namespace {

using engine::load_cpu_model;
using engine::LogitRows;
using engine::Runner;
using engine::RunnerConfig;
using engine::Sequence;
using engine::shared_cpu_model;

struct PyCheckpoint {
  engine::SequenceCheckpoint cp;
  const void* owner;
};

// ---- expert store (docs/experts.md)

py::dict counters_dict(const experts::ExpertCounters& k) {
  py::dict d;
  d["windows"] = k.windows;
  d["rows"] = k.rows;
  d["hits"] = k.hits;
  d["misses"] = k.misses;
  d["prefetch_hits"] = k.prefetch_hits;
  d["bytes_read"] = k.bytes_read;
  d["io_bytes"] = k.io_bytes;
  d["stall_s"] = static_cast<double>(k.stall_ns) * 1e-9;
  d["evictions"] = k.evictions;
  d["prefetch_reads"] = k.prefetch_reads;
  d["prefetch_used"] = k.prefetch_used;
  d["draft_demotions"] = k.draft_demotions;
  return d;
}

py::dict store_dict(experts::ExpertStore& st) {
  py::dict d;
  d["mode"] = experts::expert_mode_name(st.mode());
  d["io"] = st.io_note();
  d["direct_io"] = st.direct_io();
  d["io_threads"] = st.io_threads();
  d["layers"] = st.n_layers();
  d["experts_per_layer"] = st.n_expert();
  d["total_experts"] = st.total_experts();
  d["expert_bytes_total"] = st.layout().total_bytes();
  d["slots"] = st.n_slots();
  d["slot_bytes"] = st.slot_bytes();
  d["capacity_bytes"] = st.capacity_bytes();
  d["resident"] = st.mode() == experts::ExpertMode::Stream ? st.resident_count() : st.total_experts();
  d["resident_bytes"] = st.resident_bytes();
  d["demotes_draft_experts"] = st.demotes_draft_experts();
  d["total"] = counters_dict(st.totals());
  d["last_window"] = counters_dict(st.last_window());
  return d;
}

// The expert-store counters of expert_stats(), all zero: the Metal backends read every routed
// expert from the mapped weights (no resident set, nothing streamed).
py::dict zero_counters() {
  py::dict d;
  for (const char* k : {"windows", "rows", "hits", "misses", "prefetch_hits", "bytes_read", "io_bytes", "evictions",
                        "prefetch_reads", "prefetch_used", "draft_demotions"})
    d[k] = 0;
  d["stall_s"] = 0.0;
  return d;
}

struct EngineArgs {
  std::string path;
  std::string mtp_model;  // deepseek4: llama.cpp's separate MTP file ("" = none)
  int n_threads = 0;
  int64_t max_ctx = 0;
  int max_rows = 0;
  bool encode_mtp = true;
  config::Settings settings;
  experts::ExpertStoreConfig experts;
  model::DrafterRequant requant = model::DrafterRequant::Off;
  std::optional<cpu::RepackMode> repack;  // cpu backend: nullopt = the process's (STRATA_REPACK)
};

// The expert store's configuration of the settings' expert group.
experts::ExpertStoreConfig store_config(const config::ExpertSettings& e, bool page_cache_probe) {
  experts::ExpertStoreConfig c;
  c.mode = e.mode;
  c.cache_bytes = e.cache_bytes;
  c.cache_fraction = e.cache_fraction;
  c.direct_io = e.direct_io;
  c.io_threads = e.io_threads;
  c.prefetch = e.prefetch;
  c.page_cache_probe = page_cache_probe;
  return c;
}

class PyEngine {
 public:
  // `settings`: the validated settings of this engine (strata.Config.native()), given once; None =
  // every setting at its default, the repack mode the process's.
  PyEngine(const std::string& path, const std::string& backend, int n_threads, int64_t max_ctx, int max_rows,
           bool encode_mtp, const std::optional<config::Settings>& settings, bool expert_page_cache_probe,
           const std::string& mtp_model) {
    if (max_rows < 0) throw_error(ErrorKind::Value, "Engine: max_rows must be >= 0 (0 = the backend's default)");
    EngineArgs a;
    a.path = path;
    a.mtp_model = mtp_model;
    backend_ = mtl::parse_backend(backend);
    a.n_threads = n_threads;
    a.max_ctx = max_ctx;
    a.max_rows = max_rows;
    a.encode_mtp = encode_mtp;
    if (settings) {
      a.settings = *settings;
      a.repack = settings->cpu.repack;
    }
    const config::Settings& st = a.settings;
    a.experts = store_config(st.experts, expert_page_cache_probe);
    // The drafter's format: R-11's when asked for, else (CPU backend) the default Q4_0 by ggml's rule.
    a.requant = st.mtp.q4                                          ? model::DrafterRequant::Q4
                : st.mtp.q5                                        ? model::DrafterRequant::Q5
                : st.mtp.draft_q4 && backend_ == mtl::Backend::Cpu ? model::DrafterRequant::Q4Ggml
                                                                   : model::DrafterRequant::Off;
    spec_.retention = st.retention;
    spec_.mode = st.spec_sample;
    spec_.window_cut = st.moce.window_cut;
    py::gil_scoped_release release;
    if (backend_ == mtl::Backend::Cpu)
      build_cpu(a);
    else
      build_metal(a);
  }

  const model::HParams& hp() const { return seq_->hparams(); }
  Sequence& seq() { return *seq_; }
  const model::Model& model() const { return *model_; }
  bool cpu() const { return backend_ == mtl::Backend::Cpu; }
  const char* backend() const { return mtl::backend_name(backend_); }
  Runner& runner() {
    if (!cpu())
      throw_error(ErrorKind::Value, std::string("this needs the cpu backend (the engine runs on ") + backend() + ")");
    return static_cast<Runner&>(*seq_);
  }

  py::dict hparams() const { return hparams_dict(hp()); }

  py::object eval(const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& tokens,
                  std::optional<int64_t> start_pos, const std::string& logits, std::optional<int64_t> draft_from_row,
                  std::optional<int64_t> cut_from_row) {
    return eval_target(*seq_, mu_, tokens, start_pos, logits, draft_from_row, cut_from_row);
  }

  py::array_t<float> final_streams(int64_t pos) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pos < 0) pos += seq_->n_past();
    return held_streams(seq_->streams_at(pos), pos, hp().hc_count, hp().n_embd);
  }

  py::tuple mtp_draft(int64_t next_token, int n_steps, std::optional<int64_t> pos,
                      std::optional<py::array_t<float, py::array::c_style | py::array::forcecast>> streams) {
    check_draft_args(*seq_, next_token, n_steps);
    const int64_t n = hp().hc_count, d = hp().n_embd, Vr = hp().mtp_vocab;
    const float* H = nullptr;
    if (streams) {
      if (streams->ndim() != 2 || streams->shape(0) != n || streams->shape(1) != d)
        throw_error(ErrorKind::Value,
                    "mtp_draft: streams must have shape (" + std::to_string(n) + ", " + std::to_string(d) + ")");
      H = streams->data();
    }
    py::array_t<float> logits(std::vector<py::ssize_t>{n_steps, Vr});
    py::array_t<int32_t> toks(std::vector<py::ssize_t>{n_steps});
    float* lp = logits.mutable_data();
    int32_t* tp = toks.mutable_data();
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t p = pos ? *pos : seq_->n_past() - 1;
      seq_->mtp_draft(H, static_cast<int32_t>(next_token), p, n_steps, lp, tp);
    }
    return py::make_tuple(logits, toks);
  }

  // One MTP weight (R-11 tests and bench drafter-quant): its type, shape, address and bytes.
  py::dict mtp_weight(const std::string& name) const {
    if (!model_->mtp) throw_error(ErrorKind::Value, "this model has no MTP layer");
    const model::MtpWeights& w = *model_->mtp;
    const model::Weight* x = nullptr;
    if (name == "attn_q")
      x = &w.block.attn.q;
    else if (name == "attn_k")
      x = &w.block.attn.k;
    else if (name == "attn_v")
      x = &w.block.attn.v;
    else if (name == "attn_output")
      x = &w.block.attn.o;
    else if (name == "fc_embedding")
      x = &w.fc_embedding;
    else if (name == "fc_hidden")
      x = &w.fc_hidden;
    else if (name == "ffn_gate_inp")
      x = &w.block.moe.router;
    else if (name == "ffn_gate_shexp")
      x = &w.block.moe.sh_gate;
    else if (name == "ffn_up_shexp")
      x = &w.block.moe.sh_up;
    else if (name == "ffn_down_shexp")
      x = &w.block.moe.sh_down;
    else if (name == "ffn_gate_inp_shexp")
      x = &w.block.moe.sh_gate_inp;
    if (x == nullptr) throw_error(ErrorKind::Value, "mtp_weight: unknown MTP weight '" + name + "'");
    py::dict d;
    d["present"] = x->present();
    // A repacked weight (cpu/repack/repack.h) is reported as its plain type and bytes.
    d["type"] = quant::type_name(cpu::plain_type(x->type));
    d["repacked"] = cpu::is_repacked(x->type);
    d["rows"] = x->rows;
    d["cols"] = x->cols;
    d["address"] = reinterpret_cast<uintptr_t>(x->data);
    const std::size_t n = static_cast<std::size_t>(x->rows) * x->row_stride;
    py::array_t<uint8_t> bytes(std::vector<py::ssize_t>{x->rows, static_cast<py::ssize_t>(x->row_stride)});
    if (n && cpu::is_repacked(x->type))
      cpu::unpack_rows(x->type, x->data, x->rows, x->cols, bytes.mutable_data());
    else if (n)
      std::memcpy(bytes.mutable_data(), x->data, n);
    d["data"] = bytes;
    return d;
  }

  void commit(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    seq_->commit(n);
  }
  void rollback(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    seq_->rollback(n);
  }
  PyCheckpoint checkpoint() {
    std::lock_guard<std::mutex> lock(mu_);
    return PyCheckpoint{seq_->checkpoint(), this};
  }
  void restore(const PyCheckpoint& cp) {
    if (cp.owner != this) throw_error(ErrorKind::Value, "restore: the checkpoint belongs to another engine");
    std::lock_guard<std::mutex> lock(mu_);
    seq_->restore(cp.cp);
  }
  bool mtp_cell_valid(int64_t c) {
    std::lock_guard<std::mutex> lock(mu_);
    return seq_->mtp_cell_valid(c);
  }
  int64_t reuse_prefix(const std::vector<int32_t>& held, const std::vector<int32_t>& target, bool drafting) {
    std::lock_guard<std::mutex> lock(mu_);
    return seq_->reuse_prefix(held, target, drafting);
  }
  py::dict draft_stats() {
    std::lock_guard<std::mutex> lock(mu_);
    const draft::DraftCells& c = seq_->draft_cells();
    py::dict d;
    d["sink_end"] = c.sink_end();
    d["run_begin"] = c.run_begin();
    d["run_end"] = c.run_end();
    d["rows_checked"] = seq_->ledger().rows_checked();
    d["reads_checked"] = seq_->ledger().reads_checked();
    return d;
  }

  SpecState& spec_state() { return spec_; }
  std::mutex& mutex() { return mu_; }

  py::dict expert_stats() {
    std::lock_guard<std::mutex> lock(mu_);
    if (cpu()) return store_dict(runner().expert_store());
    const model::HParams& h = hp();
    const uint64_t layers = h.n_layer + (model_->mtp ? 1u : 0u);
    py::dict d;
    d["mode"] = "mmap";
    d["io"] =
        std::string(backend()) + ": every routed expert from the mapped weights (no expert store on this backend)";
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
    d["demotes_draft_experts"] = false;
    d["total"] = zero_counters();
    d["last_window"] = zero_counters();
    return d;
  }
  // Only expert_stats()["total"]: what a session reads after every decode round (the whole
  // dict walks the store's slots and costs tens of microseconds a call).
  py::dict expert_totals() {
    std::lock_guard<std::mutex> lock(mu_);
    return cpu() ? counters_dict(runner().expert_store().totals()) : zero_counters();
  }
  void reset_expert_stats() {
    std::lock_guard<std::mutex> lock(mu_);
    if (cpu()) runner().expert_store().reset_counters();
  }
  void clear_expert_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    runner().expert_store().clear();
  }
  routing::MoceParams moce() {
    std::lock_guard<std::mutex> lock(mu_);
    return cpu() ? runner().window().moce() : moce_;
  }
  void set_moce(const routing::MoceParams& p) {
    std::lock_guard<std::mutex> lock(mu_);
    runner().set_moce(p);
  }
  void set_route_trace(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    experts::ExpertStore& st = runner().expert_store();
    if (on)
      st.trace().enable(st.n_layers(), st.n_expert());
    else
      st.trace().disable();
  }
  py::list route_trace() {
    std::lock_guard<std::mutex> lock(mu_);
    const experts::RouteTrace& t = runner().expert_store().trace();
    if (!t.on()) throw_error(ErrorKind::Value, "route_trace: tracing is off (set_route_trace(True) first)");
    const py::ssize_t E = static_cast<py::ssize_t>(t.n_expert());
    py::list out;
    for (const experts::RouteTrace::Layer& l : t.layers()) {
      py::dict d;
      d["rows"] = l.rows;
      d["k"] = l.k;
      d["draft_from_row"] = l.draft_from_row;
      d["moce"] = l.moce;
      py::array_t<float> probs(std::vector<py::ssize_t>{l.rows, E});
      if (!l.probs.empty()) std::memcpy(probs.mutable_data(), l.probs.data(), l.probs.size() * sizeof(float));
      d["probs"] = probs;
      py::array_t<int32_t> ids(std::vector<py::ssize_t>{l.rows, l.k});
      if (!l.ids.empty()) std::memcpy(ids.mutable_data(), l.ids.data(), l.ids.size() * sizeof(int32_t));
      d["ids"] = ids;
      if (l.has_map) {
        py::array_t<uint8_t> res(std::vector<py::ssize_t>{E});
        std::memcpy(res.mutable_data(), l.resident.data(), l.resident.size());
        d["resident"] = res;
      } else {
        d["resident"] = py::none();
      }
      out.append(d);
    }
    return out;
  }

  model::DrafterRequant requant() const { return requant_; }

 private:
  void build_cpu(const EngineArgs& a) {
    engine::check_n_threads(a.n_threads);  // before any load
    RunnerConfig cfg;
    cfg.experts = a.experts;
    cfg.moce = a.settings.moce.params();
    cfg.drafter_resident = a.settings.moce.drafter_resident;
    cfg.n_threads = a.n_threads;
    cfg.max_ctx = a.max_ctx;
    cfg.max_rows = a.max_rows > 0 ? a.max_rows : 512;
    cfg.mtp_sink = a.settings.mtp.sink;
    cfg.mtp_window = a.settings.mtp.window;
    cfg.encode_mtp = a.encode_mtp;
    cfg.mtp_requant = a.requant;
    cfg.mtp_head_q4 = a.settings.mtp.draft_q4;  // the head's part (the rest is a.requant)
    cfg.repack = a.repack;
    requant_ = a.requant;
    // mmap mode: one prepared copy of the weights per file and load settings in the process, shared by
    // every engine (session) opened on it (engine/prepared_model.h). A streaming store advises the
    // mapping before the load-time reads, so each streaming engine prepares its own.
    std::unique_ptr<Runner> runner;
    if (a.experts.mode == experts::ExpertMode::Mmap)
      runner = std::make_unique<Runner>(shared_cpu_model(a.path, a.mtp_model, a.settings.kv_type, a.requant,
                                                         a.repack.value_or(cpu::repack_mode()), a.n_threads),
                                        cfg);
    else
      runner = std::make_unique<Runner>(load_cpu_model(a.path, a.mtp_model, a.settings.kv_type), cfg);
    model_ = &runner->model();
    seq_ = std::move(runner);
  }

  void build_metal(const EngineArgs& a) {
    if (a.n_threads < 0 || a.n_threads > 1024)
      throw_error(ErrorKind::Value, "Engine: n_threads = " + std::to_string(a.n_threads) + " must be in [0, 1024]");
    if (a.experts.mode != experts::ExpertMode::Mmap)
      throw_error(ErrorKind::Config, std::string("expert_mode 'stream' needs the cpu backend: the ") + backend() +
                                         " backend reads every expert from the mapped weights");
    mtl::MetalModelConfig cfg;
    cfg.max_ctx = a.max_ctx;
    cfg.max_rows = a.max_rows > 0 ? a.max_rows : 32;
    cfg.drafter_tiles = mtl::drafter_tiles(a.settings.metal.mtp_tile);
    cfg.moce = a.settings.moce.params();
    moce_ = cfg.moce;
    requant_ = a.requant;
    own_model_ = model::Model::load(a.path, a.mtp_model);
    if (a.settings.kv_type && *a.settings.kv_type != own_model_->hparams().kv_type)
      throw_error(ErrorKind::Config, std::string("kv_type ") + model::kv_type_name(*a.settings.kv_type) +
                                         " needs the cpu backend: the " + backend() +
                                         " backend keeps each model's own K/V type (kv_type auto)");
    // R-11 before the device wraps the drafter's weights (the Q4_0 / Q5_0 GEMVs run as any other).
    model::requant_drafter(*own_model_, a.requant, &ThreadPool::global());
    if (backend_ == mtl::Backend::MetalEmu) {
      // Threadgroups on a pool (results do not depend on scheduling): the shared one, or n_threads.
      emu::Options opt;
      if (a.n_threads == 1) {
        opt.pool = nullptr;
      } else if (a.n_threads > 1) {
        own_pool_ = std::make_unique<ThreadPool>(a.n_threads);
        opt.pool = own_pool_.get();
      } else {
        opt.pool = &ThreadPool::global();
      }
      device_ = std::make_unique<mtl::EmuDevice>(opt);
    } else {
      device_ = mtl::create_device(backend_, a.settings.metal.metallib);
    }
    engine::SequenceConfig sc;
    sc.mtp_sink = a.settings.mtp.sink;
    sc.mtp_window = a.settings.mtp.window;
    sc.encode_mtp = a.encode_mtp;
    model_ = own_model_.get();
    seq_ = mtl::metal_sequence(*device_, *own_model_, cfg, sc);
  }

  mtl::Backend backend_ = mtl::Backend::Cpu;
  model::DrafterRequant requant_ = model::DrafterRequant::Off;
  routing::MoceParams moce_;
  // The Metal backends: the model, the emulator's pool and the device the sequence runs on.
  std::unique_ptr<model::Model> own_model_;
  std::unique_ptr<ThreadPool> own_pool_;
  std::unique_ptr<mtl::Device> device_;
  const model::Model* model_ = nullptr;
  std::unique_ptr<Sequence> seq_;  // after what it refers to
  std::mutex mu_;
  SpecState spec_;  // after seq_: its speculator refers to the sequence
};

}  // namespace

void bind_engine(py::module_& m) {
  m.def("prepared_models_alive", &engine::prepared_models_alive, py::call_guard<py::gil_scoped_release>(),
        "How many prepared models (one per file and load settings, shared by every cpu engine in mmap mode "
        "opened on them) are alive in this process");
  m.def(
      "metal_device_available",
      [] {
#if defined(STRATA_HAVE_METAL_DEVICE)
        return true;
#else
        return false;
#endif
      },
      "Whether this build can run the 'metal' backend (macOS with metal-cpp); 'metal-emu' runs everywhere");

  py::class_<PyCheckpoint>(m, "EngineCheckpoint", "Opaque state of an Engine (lengths and write stamps)")
      .def_property_readonly("n_past", [](const PyCheckpoint& c) { return c.cp.n_past; })
      .def_property_readonly("n_committed", [](const PyCheckpoint& c) { return c.cp.n_committed; });

  py::class_<PyEngine> engine_cls(
      m, "Engine",
      "A GGUF model (strata or qwen3moe) over one sequence: the main window (KV cells indexed by "
      "position) and, when the model has one, the MTP drafter, on the cpu, metal-emu or metal backend.");
  engine_cls
      .def(py::init<const std::string&, const std::string&, int, int64_t, int, bool,
                    const std::optional<config::Settings>&, bool, const std::string&>(),
           py::arg("path"), py::arg("backend") = "cpu", py::arg("n_threads") = 0, py::arg("max_ctx") = 0,
           py::arg("max_rows") = 0, py::arg("encode_mtp") = true, py::arg("settings") = py::none(),
           py::arg("expert_page_cache_probe") = false, py::arg("mtp_model") = "",
           "backend: 'cpu', 'metal-emu' or 'metal'. max_ctx: cells (0 = the model's context, at most 32768 on cpu "
           "and 4096 on metal); max_rows: rows per chunk (0 = 512 on cpu, 32 on metal); encode_mtp: encode the "
           "drafter's cells while evaluating. settings: the engine's validated Settings (strata.Config.native(): "
           "MTP cells, drafter weight format, retention, verification rule, MOCE routing, Metal library and tile, "
           "expert store, repack, K/V cell type), given once; None = every setting at its default and the process's "
           "repack mode. "
           "expert_page_cache_probe: in mmap mode, count uses whose pages were not in the page cache as misses "
           "(mincore; the expert benchmark). mtp_model: a deepseek4 model's separate MTP file (llama.cpp's "
           "mtp-*.gguf), bound as its drafter. See docs/settings.md, docs/experts.md, docs/metal.md.")
      .def_property_readonly("backend", &PyEngine::backend)
      .def_property_readonly("arch", [](const PyEngine& e) { return e.hp().arch_name; })
      .def_property_readonly("hparams", &PyEngine::hparams)
      .def_property_readonly("vocab_size", [](const PyEngine& e) { return e.hp().n_vocab; })
      .def_property_readonly("max_ctx", [](PyEngine& e) { return e.seq().max_ctx(); })
      .def_property_readonly("max_rows", [](PyEngine& e) { return e.seq().max_rows(); })
      .def_property_readonly("n_past", [](PyEngine& e) { return e.seq().n_past(); })
      .def_property_readonly("n_committed", [](PyEngine& e) { return e.seq().n_committed(); })
      .def_property_readonly("has_mtp", [](PyEngine& e) { return e.seq().has_mtp(); })
      .def_property_readonly("mtp_vocab_ids", [](PyEngine& e) { return draft_vocab_array(e.seq()); })
      .def_property_readonly("mtp_requant",
                             [](PyEngine& e) -> py::object {
                               if (e.requant() == model::DrafterRequant::Off) return py::none();
                               return py::str(model::drafter_requant_name(e.requant()));
                             })
      .def_property_readonly(
          "repack",
          [](PyEngine& e) {
            const model::RepackReport& r = e.runner().repack_report();
            py::dict d;
            d["mode"] = std::string(cpu::repack_mode_name(r.mode));
            d["matrices"] = r.matrices;
            d["bytes"] = r.bytes;
            d["seconds"] = r.seconds;
            d["experts_left"] = r.experts_left;
            d["paired"] = r.paired;
            return d;
          },
          "cpu: what the engine repacked at load (docs/quantization.md): mode, matrices, bytes, seconds, "
          "experts_left, paired (layers whose routed gate and up experts lie side by side)")
      .def("mtp_weight", &PyEngine::mtp_weight, py::arg("name"),
           "One MTP weight as a dict: present, type, repacked, rows, cols, address, data (uint8 [rows, row_bytes] "
           "copy; a repacked weight as its plain type and bytes)")
      .def("eval", &PyEngine::eval, py::arg("tokens"), py::arg("start_pos") = py::none(), py::arg("logits") = "last",
           py::arg("draft_from_row") = py::none(), py::arg("cut_from_row") = py::none(),
           "Run tokens at positions start_pos.. (default n_past; start_pos <= n_past). Returns float32 logits: "
           "[V] for logits='last', [n, V] for 'all', None for 'none'. draft_from_row: rows >= it are draft rows of "
           "a verification window (MOCE draft flag, docs/experts.md); None = no draft rows. cut_from_row (>= 1, "
           "logits='all'): an exact window cut from that row on (stream mode; docs/routing.md): the rows from the "
           "first that would read an expert the rows before it do not are dropped, and the logits have one row per "
           "row run.")
      .def("commit", &PyEngine::commit, py::arg("n"), "Keep exactly n cells and mark them committed")
      .def("rollback", &PyEngine::rollback, py::arg("n"), "Drop back to n cells (n <= n_past)")
      .def("checkpoint", &PyEngine::checkpoint)
      .def("restore", &PyEngine::restore, py::arg("checkpoint"))
      .def("final_streams", &PyEngine::final_streams, py::arg("pos") = -1,
           "Final main-model streams [n, d] (before the HyperHead) of a position of the last eval")
      .def("mtp_draft", &PyEngine::mtp_draft, py::arg("next_token"), py::arg("n_steps") = 1,
           py::arg("pos") = py::none(), py::arg("streams") = py::none(),
           "Chained MTP draft from the streams of position pos (default n_past-1; or `streams` [n, d]) and the "
           "token at pos+1. Returns (logits [n_steps, Vr] over the restricted vocabulary, token ids [n_steps]).")
      .def("mtp_cell_valid", &PyEngine::mtp_cell_valid, py::arg("cell"))
      .def("reuse_prefix", &PyEngine::reuse_prefix, py::arg("held"), py::arg("target"), py::arg("drafting"),
           "Where to start evaluating `target` when the engine holds the tokens `held`: the longest common prefix "
           "(at most len(target) - 1), one token less (or 0) when drafting and a drafter cell a later draft row "
           "reads would be lost there (engine/sequence.h)")
      .def("draft_stats", &PyEngine::draft_stats,
           "The drafter's cell bookkeeping (sink_end, run_begin, run_end) and the ledger's checked rows/reads")
      .def("expert_stats", &PyEngine::expert_stats,
           "The expert store: mode, I/O path, slots, and counters ('total' since the last reset, 'last_window' of the "
           "last main-window run): hits, misses, prefetch_hits, bytes_read, io_bytes, stall_s, evictions, "
           "prefetch_reads, prefetch_used, draft_demotions, windows, "
           "rows (zero on the metal backends: no expert store)")
      .def("expert_totals", &PyEngine::expert_totals, "expert_stats()['total'] alone (cheap: read every round)")
      .def("reset_expert_stats", &PyEngine::reset_expert_stats)
      .def("clear_expert_cache", &PyEngine::clear_expert_cache, "Drop every resident expert (stream mode)")
      .def_property("moce", &PyEngine::moce, &PyEngine::set_moce, "MoceParams of the main window's expert selection")
      .def("set_route_trace", &PyEngine::set_route_trace, py::arg("on"),
           "Record, per MoE layer of the last window, the router's probabilities, residency map and chosen ids (tests)")
      .def("route_trace", &PyEngine::route_trace);
  def_spec_round(engine_cls);
}

}  // namespace strata::bindings
