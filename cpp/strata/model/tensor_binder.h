#pragma once
// Binds named tensors of a ModelSource to weight views, checking presence, type and shape. Every
// failure is a Format error naming the tensor and the expected versus found shape or type.
#include <string>
#include <vector>

#include "strata/model/model_source.h"
#include "strata/model/weights.h"

namespace strata::model {

class TensorBinder {
 public:
  explicit TensorBinder(const ModelSource& src) : src_(src) {}

  bool has(const std::string& name) const { return src_.find_tensor(name) != nullptr; }
  // A 2-D matrix [rows, cols] of any computable type.
  Weight matrix(const std::string& name, int64_t rows, int64_t cols);
  // A 3-D stack [n, rows, cols] of any computable type.
  ExpertWeights experts(const std::string& name, int64_t n, int64_t rows, int64_t cols);
  // An F32 tensor with exactly these numpy dims (outer first).
  const float* f32(const std::string& name, const std::vector<int64_t>& dims);
  // An I32 vector of n elements.
  const int32_t* i32(const std::string& name, int64_t n);
  // An I32 tensor with exactly these numpy dims (outer first).
  const int32_t* i32(const std::string& name, const std::vector<int64_t>& dims);
  // The first dimension (outer, numpy order) of a 2-D tensor, e.g. the vocabulary of token_embd.
  int64_t rows_of(const std::string& name) const;

  const std::string& origin() const { return src_.origin(); }

 private:
  const TensorRef& need(const std::string& name) const;
  void check_shape(const TensorRef& t, const std::vector<int64_t>& dims) const;
  void check_size(const TensorRef& t, std::size_t bytes) const;

  const ModelSource& src_;
};

// numpy-order shape text, e.g. "[2560, 512]".
std::string shape_text(const std::vector<int64_t>& dims);

}  // namespace strata::model
