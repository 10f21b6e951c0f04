#pragma once
// Reads and validates llama.cpp's `deepseek4` metadata keys (docs/models.md, deepseek4; docs/gguf.md).
#include "strata/model/hparams.h"
#include "strata/model/model_source.h"

namespace strata::model {

// Every missing key, wrong-length per-layer array and out-of-range value is a Format error naming the key.
HParams read_deepseek4(const ModelSource& src);

}  // namespace strata::model
