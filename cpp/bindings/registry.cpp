// Lists every area binder. Kept apart from module.cpp so adding an area touches one line here.
#include "bindings/bindings.h"

namespace strata::bindings {

void bind_all(pybind11::module_& m) {
  bind_gguf(m);
  bind_quant(m);
  bind_decode(m);    // before the engine: its signatures name decode's types
  bind_settings(m);  // after decode (its parse_settings lives there), before the engine (Settings)
  bind_engine(m);
  bind_inspect(m);
}

}  // namespace strata::bindings
