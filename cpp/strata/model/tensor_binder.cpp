#include "strata/model/tensor_binder.h"

#include <cstdint>

#include "strata/util/error.h"

namespace strata::model {

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

namespace {
// GGUF order (innermost first) to numpy order.
std::vector<int64_t> numpy_dims(const TensorRef& t) { return {t.ne.rbegin(), t.ne.rend()}; }
}  // namespace

const TensorRef& TensorBinder::need(const std::string& name) const {
  const TensorRef* t = src_.find_tensor(name);
  if (!t) throw_file_error(ErrorKind::Format, src_.origin(), "tensor " + name + " is missing");
  if (!t->data) throw_file_error(ErrorKind::Format, src_.origin(), "tensor " + name + " has no data");
  return *t;
}

void TensorBinder::check_shape(const TensorRef& t, const std::vector<int64_t>& dims) const {
  // Trailing unit dimensions in GGUF order are equivalent (a [1, d] tensor may be stored as [d]).
  std::vector<int64_t> found = numpy_dims(t);
  auto strip = [](std::vector<int64_t> v) {
    while (v.size() > 1 && v.front() == 1) v.erase(v.begin());
    return v;
  };
  if (strip(found) != strip(dims))
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + t.name + " has shape " + shape_text(found) + ", expected " + shape_text(dims));
}

void TensorBinder::check_size(const TensorRef& t, std::size_t bytes) const {
  if (t.nbytes < bytes)
    throw_file_error(
        ErrorKind::Format, src_.origin(),
        "tensor " + t.name + " holds " + std::to_string(t.nbytes) + " bytes, expected " + std::to_string(bytes));
}

Weight TensorBinder::matrix(const std::string& name, int64_t rows, int64_t cols) {
  const TensorRef& t = need(name);
  check_shape(t, {rows, cols});
  if (!quant::type_supported(t.type))
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + name + " has type " + quant::type_name(t.type) + ", which strata cannot compute with");
  if (cols % quant::block_size(t.type) != 0)
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + name + " rows of " + std::to_string(cols) + " are not a multiple of the " +
                         quant::type_name(t.type) + " block");
  Weight w;
  w.type = t.type;
  w.data = t.data;
  w.rows = rows;
  w.cols = cols;
  w.row_stride = quant::row_bytes(t.type, cols);
  check_size(t, w.row_stride * static_cast<std::size_t>(rows));
  return w;
}

ExpertWeights TensorBinder::experts(const std::string& name, int64_t n, int64_t rows, int64_t cols) {
  const TensorRef& t = need(name);
  check_shape(t, {n, rows, cols});
  if (!quant::type_supported(t.type))
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + name + " has type " + quant::type_name(t.type) + ", which strata cannot compute with");
  if (cols % quant::block_size(t.type) != 0)
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + name + " rows of " + std::to_string(cols) + " are not a multiple of the " +
                         quant::type_name(t.type) + " block");
  ExpertWeights w;
  w.type = t.type;
  w.data = t.data;
  w.n_expert = n;
  w.rows = rows;
  w.cols = cols;
  w.row_stride = quant::row_bytes(t.type, cols);
  w.expert_stride = w.row_stride * static_cast<std::size_t>(rows);
  check_size(t, w.expert_stride * static_cast<std::size_t>(n));
  return w;
}

const float* TensorBinder::f32(const std::string& name, const std::vector<int64_t>& dims) {
  const TensorRef& t = need(name);
  check_shape(t, dims);
  if (t.type != quant::GGMLType::F32)
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + name + " has type " + quant::type_name(t.type) + ", expected F32");
  std::size_t n = 1;
  for (int64_t v : dims) n *= static_cast<std::size_t>(v);
  check_size(t, n * sizeof(float));
  if (reinterpret_cast<std::uintptr_t>(t.data) % alignof(float) != 0)
    throw_file_error(ErrorKind::Format, src_.origin(), "tensor " + name + " data is not 4-byte aligned");
  return reinterpret_cast<const float*>(t.data);
}

const int32_t* TensorBinder::i32(const std::string& name, int64_t n) { return i32(name, std::vector<int64_t>{n}); }

const int32_t* TensorBinder::i32(const std::string& name, const std::vector<int64_t>& dims) {
  const TensorRef& t = need(name);
  check_shape(t, dims);
  int64_t n = 1;
  for (int64_t v : dims) n *= v;
  if (t.type != quant::GGMLType::I32)
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + name + " has type " + quant::type_name(t.type) + ", expected I32");
  check_size(t, static_cast<std::size_t>(n) * sizeof(int32_t));
  if (reinterpret_cast<std::uintptr_t>(t.data) % alignof(int32_t) != 0)
    throw_file_error(ErrorKind::Format, src_.origin(), "tensor " + name + " data is not 4-byte aligned");
  return reinterpret_cast<const int32_t*>(t.data);
}

int64_t TensorBinder::rows_of(const std::string& name) const {
  const TensorRef& t = need(name);
  if (t.ne.size() != 2)
    throw_file_error(ErrorKind::Format, src_.origin(),
                     "tensor " + name + " has shape " + shape_text(numpy_dims(t)) + ", expected 2 dimensions");
  return t.ne[1];
}

}  // namespace strata::model
