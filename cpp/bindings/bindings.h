#pragma once
// Each area's binder. New areas add a declaration here and a call in registry.cpp.
#include <pybind11/pybind11.h>

namespace strata::bindings {
void bind_all(pybind11::module_& m);
void bind_gguf(pybind11::module_& m);
void bind_quant(pybind11::module_& m);
void bind_engine(pybind11::module_& m);
void bind_inspect(pybind11::module_& m);
void bind_decode(pybind11::module_& m);
void bind_settings(pybind11::module_& m);
}  // namespace strata::bindings
