// The pybind11 module strata._strata. Each responsibility binds itself in its own file
// (bind_<area>.cpp); this file only wires them and maps strata::Error onto Python classes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "strata/cpu/features.h"
#include "strata/util/error.h"
#include "strata/util/log.h"
#include "strata/util/thread_pool.h"

namespace py = pybind11;

PYBIND11_MODULE(_strata, m) {
  m.doc() = "strata native core";
  m.attr("__version__") = STRATA_VERSION;

  // Exception classes: StrataError is the base; the others also derive from the matching builtin
  // so callers may catch either.
  static py::exception<strata::Error> base(m, "StrataError");
  static py::object format_error =
      py::reinterpret_steal<py::object>(PyErr_NewException("strata._strata.FormatError", base.ptr(), nullptr));
  static py::object config_error = py::reinterpret_steal<py::object>(PyErr_NewException(
      "strata._strata.ConfigError", py::make_tuple(base, py::handle(PyExc_ValueError)).ptr(), nullptr));
  static py::object value_error = py::reinterpret_steal<py::object>(PyErr_NewException(
      "strata._strata.InvalidArgument", py::make_tuple(base, py::handle(PyExc_ValueError)).ptr(), nullptr));
  static py::object io_error = py::reinterpret_steal<py::object>(
      PyErr_NewException("strata._strata.IOFailure", py::make_tuple(base, py::handle(PyExc_OSError)).ptr(), nullptr));
  m.attr("FormatError") = format_error;
  m.attr("ConfigError") = config_error;
  m.attr("InvalidArgument") = value_error;
  m.attr("IOFailure") = io_error;

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const strata::Error& e) {
      PyObject* cls = base.ptr();
      switch (e.kind()) {
        case strata::ErrorKind::Format: cls = format_error.ptr(); break;
        case strata::ErrorKind::Config: cls = config_error.ptr(); break;
        case strata::ErrorKind::Value: cls = value_error.ptr(); break;
        case strata::ErrorKind::IO: cls = io_error.ptr(); break;
        case strata::ErrorKind::Internal: break;
      }
      PyErr_SetString(cls, e.what());
    }
  });

  m.def("build_features", &strata::cpu::build_features, "ISA features compiled into this build");
  m.def(
      "active_isa", [] { return std::string(strata::cpu::active_path_name()); },
      "The kernel path the kernels dispatch to now (an ISA name, or avx512+amx)");
  m.def("supported_isas", [] {
    std::vector<std::string> out;
    for (auto isa : strata::cpu::compiled_isas()) {
      if (!strata::cpu::isa_supported(isa)) continue;
      out.emplace_back(strata::cpu::isa_name(isa));
      if (isa == strata::cpu::Isa::Avx512 && strata::cpu::amx_status().usable)
        out.emplace_back(strata::cpu::kAmxPathName);
    }
    return out;
  });
  m.def("avx512_vbmi", &strata::cpu::cpu_has_avx512_vbmi,
        "Whether the avx512 path's IQ2 / IQ3 kernels use AVX512_VBMI lookups here");
  m.def(
      "amx_status", [] { return strata::cpu::amx_status().detail; },
      "Whether AMX tiles are usable here, or the first check that said no (CPUID, XCR0, arch_prctl, probe)");
  m.def(
      "force_isa",
      [](const std::string& name) {
        if (name == strata::cpu::kAmxPathName) {
          strata::cpu::force_amx(true);
          return strata::cpu::force_isa(strata::cpu::Isa::Avx512);
        }
        for (auto isa : strata::cpu::compiled_isas())
          if (name == strata::cpu::isa_name(isa)) {
            strata::cpu::force_isa(isa);
            return strata::cpu::force_amx(false);  // a named ISA path is that path without AMX
          }
        strata::throw_error(strata::ErrorKind::Value, "unknown ISA: " + name);
      },
      py::arg("name"), "Force kernels onto one path (tests, benchmarks): an ISA name or avx512+amx");
  m.def("set_threads", &strata::ThreadPool::set_default_threads, py::arg("n"),
        "Threads of the default pool (0 = all cores)");
  m.def("threads", [] { return strata::ThreadPool::global().size(); });
  m.def("set_log_level", [](int level) { strata::set_log_level(static_cast<strata::LogLevel>(level)); });

  strata::bindings::bind_all(m);
}
