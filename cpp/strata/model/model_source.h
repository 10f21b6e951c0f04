#pragma once
// Where a model's metadata and tensors come from. The engine binds weights through this interface
// only, so a GGUF file (gguf_model_source) and an in-memory model built by a test look the same.
// Tensor data is borrowed: it stays valid as long as the source lives (the mmap of a file).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/quant/types.h"
#include "strata/util/mmap_file.h"

namespace strata::model {

struct TensorRef {
  std::string name;
  quant::GGMLType type = quant::GGMLType::F32;
  std::vector<int64_t> ne;  // ne[0] is the innermost (contiguous) dimension, as GGUF stores it
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
};

class ModelSource {
 public:
  virtual ~ModelSource() = default;
  // A name for error messages (the file path).
  virtual const std::string& origin() const = 0;
  // nullopt when the key is absent; a key present with an unusable type is a Format error.
  virtual std::optional<uint64_t> find_uint(const std::string& key) const = 0;
  virtual std::optional<float> find_float(const std::string& key) const = 0;
  virtual std::optional<bool> find_bool(const std::string& key) const = 0;
  virtual std::optional<std::string> find_string(const std::string& key) const = 0;
  // Numeric arrays (deepseek4's per-layer keys); nullopt when absent (sources without arrays).
  virtual std::optional<std::vector<uint32_t>> find_u32_array(const std::string& key) const {
    (void)key;
    return std::nullopt;
  }
  virtual std::optional<std::vector<float>> find_f32_array(const std::string& key) const {
    (void)key;
    return std::nullopt;
  }
  // nullptr when absent.
  virtual const TensorRef* find_tensor(const std::string& name) const = 0;
  // The absolute file offset of tensor bytes at p when this source is a file (the expert store
  // reads experts with positioned reads); nullopt for in-memory sources or a p outside the file.
  virtual std::optional<uint64_t> file_offset(const uint8_t* p) const {
    (void)p;
    return std::nullopt;
  }
};

// Opens a GGUF file (mmap) as a model source.
std::unique_ptr<ModelSource> open_gguf_source(const std::string& path,
                                              MmapFile::Access access = MmapFile::Access::Normal);

}  // namespace strata::model
