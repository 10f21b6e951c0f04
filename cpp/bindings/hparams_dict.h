#pragma once
// A model's hyper-parameters as the Python dict Engine.hparams and inspect_model return.
#include <pybind11/pybind11.h>

#include "strata/model/hparams.h"

namespace strata::bindings {
pybind11::dict hparams_dict(const model::HParams& h);
}  // namespace strata::bindings
