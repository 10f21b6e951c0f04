// strata._strata.Settings: the typed settings of one engine (config/settings.h), validated by the
// one C++ settings parser and handed to Engine(settings=...) once. strata.Config builds it
// (Config.native()); decode.parse_settings / decode.known_settings show the same parser as dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "strata/config/settings.h"
#include "strata/cpu/features.h"

namespace py = pybind11;

namespace strata::bindings {
namespace {

py::dict settings_dict(const config::Settings& s) {
  py::dict retention;
  std::vector<float> sched(s.retention.schedule.values.begin(),
                           s.retention.schedule.values.begin() + s.retention.schedule.size);
  retention["schedule"] = sched;
  retention["min_cum_p"] = s.retention.min_cum_p;
  retention["policy_on"] = s.retention.policy_on;
  py::dict moce;
  moce["log_bonus"] = s.moce.log_bonus;
  moce["rank1"] = s.moce.rank1;
  moce["protect"] = s.moce.protect;
  moce["draft"] = s.moce.draft;
  moce["window"] = s.moce.window_log_bonus;
  moce["window_cut"] = s.moce.window_cut;
  moce["drafter_resident"] = s.moce.drafter_resident;
  moce["params"] = s.moce.params();  // the engine's MoceParams (m = fl32(e^λ) computed here, once)
  py::dict mtp;
  mtp["sink"] = s.mtp.sink;
  mtp["window"] = s.mtp.window;
  mtp["q4"] = s.mtp.q4;
  mtp["draft_q4"] = s.mtp.draft_q4;
  mtp["q5"] = s.mtp.q5;
  py::dict metal;
  metal["metallib"] = s.metal.metallib;
  metal["mtp_tile"] = s.metal.mtp_tile;
  py::dict experts;
  experts["mode"] = experts::expert_mode_name(s.experts.mode);
  experts["cache_bytes"] = s.experts.cache_bytes;
  experts["cache_fraction"] = s.experts.cache_fraction;
  experts["direct_io"] = experts::direct_io_name(s.experts.direct_io);
  experts["io_threads"] = s.experts.io_threads;
  experts["prefetch"] = experts::prefetch_name(s.experts.prefetch);
  py::dict cpu;
  cpu["isa"] = s.cpu.amx ? cpu::kAmxPathName : s.cpu.isa ? cpu::isa_name(*s.cpu.isa) : "auto";
  cpu["repack"] = cpu::repack_mode_name(s.cpu.repack);
  py::dict out;
  out["metal"] = metal;
  out["retention"] = retention;
  out["moce"] = moce;
  out["mtp"] = mtp;
  out["experts"] = experts;
  out["cpu"] = cpu;
  out["spec_sample"] = s.spec_sample == sampling::SpecSample::Exact ? "exact" : "greedy";
  out["kv_type"] = s.kv_type ? model::kv_type_name(*s.kv_type) : "auto";
  return out;
}

}  // namespace

void bind_settings(py::module_& m) {
  py::class_<config::Settings>(
      m, "Settings",
      "The validated STRATA_* settings of one engine (retention, MTP cells, verification rule, MOCE routing, "
      "Metal, expert store, cpu): Settings(env) validates a mapping of STRATA_* variables (a rejected group is a "
      "ConfigError naming the variable and its rule); Settings.parse(env) gives (settings, diagnostics) with the "
      "rejected groups at their defaults. strata.Config.native() builds one; Engine(settings=...) takes it.")
      .def(py::init([](const config::EnvMap& env) { return config::load_settings_strict(env); }),
           py::arg("env") = config::EnvMap{})
      .def_static(
          "parse",
          [](const config::EnvMap& env) {
            config::ParseResult r = config::parse_settings(env);
            return py::make_tuple(r.settings, r.diagnostics);
          },
          py::arg("env"), "(settings, diagnostics): each rejected group at its defaults with one diagnostic")
      .def("as_dict", &settings_dict, "The settings as nested dicts, one per group");

  py::module_ decode = m.attr("decode");
  decode.def(
      "parse_settings",
      [](const config::EnvMap& env, bool strict) -> py::object {
        if (strict) return settings_dict(config::load_settings_strict(env));
        const auto r = config::parse_settings(env);
        return py::make_tuple(settings_dict(r.settings), r.diagnostics);
      },
      py::arg("env"), py::arg("strict") = true,
      "Validate STRATA_* settings from a mapping (Settings(env).as_dict()). strict: the settings dict or "
      "ConfigError; otherwise (settings with rejected groups at defaults, diagnostics)");
  decode.def("known_settings", [] {
    py::list out;
    for (const auto& s : config::known_settings()) {
      py::dict d;
      d["name"] = s.name;
      d["group"] = s.group;
      d["default"] = s.default_value;
      d["rule"] = s.rule;
      out.append(d);
    }
    return out;
  });
}

}  // namespace strata::bindings
