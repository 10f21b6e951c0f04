// strata._strata.quant: block formats, quantizers, dequantization and the CPU dot/GEMV kernels
// over numpy arrays (tests, the converter, benchmarks). The typed face is python/strata/quant.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/bindings.h"
#include "strata/cpu/gemv.h"
#include "strata/cpu/repack/repack.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/membench.h"
#include "strata/quant/blocks.h"
#include "strata/quant/dequantize.h"
#include "strata/quant/quantize.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace py = pybind11;

namespace strata::bindings {
namespace {

using quant::GGMLType;
using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

GGMLType parse_type(const std::string& name) {
  const auto t = quant::type_from_name(name);
  if (!t) throw_error(ErrorKind::Value, "unknown ggml type name: " + name);
  return *t;
}

GGMLType parse_supported(const std::string& name) {
  const GGMLType t = parse_type(name);
  if (!quant::type_supported(t))
    throw_error(ErrorKind::Value, std::string("no kernels for type ") + quant::type_name(t));
  return t;
}

quant::QuantMethod parse_method(const std::string& m) {
  if (m == "ggml") return quant::QuantMethod::Ggml;
  if (m == "lloyd") return quant::QuantMethod::Lloyd;
  throw_error(ErrorKind::Value, "unknown quantization method '" + m + "' (expected 'ggml' or 'lloyd')");
}

// Raw bytes of a C-contiguous uint8 array; anything else is refused rather than converted.
const uint8_t* bytes_of(const py::array& a, std::size_t expected, const char* what) {
  if (!a.dtype().is(py::dtype::of<uint8_t>()))
    throw_error(ErrorKind::Value,
                std::string(what) + " must be a uint8 array, got dtype " + py::str(a.dtype()).cast<std::string>());
  if (!(a.flags() & py::array::c_style)) throw_error(ErrorKind::Value, std::string(what) + " must be C-contiguous");
  if (static_cast<std::size_t>(a.nbytes()) != expected)
    throw_error(ErrorKind::Value, std::string(what) + " holds " + std::to_string(a.nbytes()) + " bytes, expected " +
                                      std::to_string(expected));
  return static_cast<const uint8_t*>(a.data());
}

int64_t checked_dim(int64_t v, const char* what) {
  if (v < 0) throw_error(ErrorKind::Value, std::string(what) + " must be >= 0");
  return v;
}

py::array_t<uint8_t> quantize(const F32Array& src, const std::string& type_name, const std::string& method) {
  const GGMLType t = parse_type(type_name);
  const quant::QuantMethod m = parse_method(method);
  quant::require_quantizer(t, m);
  if (src.ndim() < 1) throw_error(ErrorKind::Value, "quantize needs an array of at least one dimension");
  const int64_t cols = src.shape(src.ndim() - 1);
  const int64_t rows = cols == 0 ? 0 : static_cast<int64_t>(src.size()) / cols;
  const std::size_t stride = quant::row_bytes(t, cols);
  std::vector<py::ssize_t> shape(src.shape(), src.shape() + src.ndim());
  shape.back() = static_cast<py::ssize_t>(stride);
  py::array_t<uint8_t> out(shape);
  const float* in = src.data();
  uint8_t* dst = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    quant::quantize_matrix(t, in, rows, cols, dst, m, &ThreadPool::global());
  }
  return out;
}

py::array_t<float> dequantize(const py::array& data, const std::string& type_name, const std::vector<int64_t>& shape) {
  const GGMLType t = parse_supported(type_name);
  if (shape.empty()) throw_error(ErrorKind::Value, "dequantize needs a shape of at least one dimension");
  int64_t rows = 1;
  for (int64_t d : shape) {
    checked_dim(d, "every dimension");
    if (d > 0 && rows > (int64_t{1} << 40) / d) throw_error(ErrorKind::Value, "shape too large");
    rows *= d;
  }
  const int64_t cols = shape.back();
  rows = cols == 0 ? 0 : rows / cols;
  const std::size_t stride = quant::row_bytes(t, cols);
  const uint8_t* src = bytes_of(data, stride * static_cast<std::size_t>(rows), "data");
  py::array_t<float> out(std::vector<py::ssize_t>(shape.begin(), shape.end()));
  float* dst = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    for (int64_t r = 0; r < rows; ++r)
      quant::dequantize_row(t, src + r * static_cast<int64_t>(stride), dst + r * cols, cols);
  }
  return out;
}

// Decodes the activation form the kernels of `type` would multiply x with.
py::array_t<float> activation_values(const F32Array& x, const std::string& type_name) {
  const GGMLType t = parse_supported(type_name);
  if (x.ndim() != 1) throw_error(ErrorKind::Value, "x must be one-dimensional");
  const int64_t n = x.shape(0);
  std::vector<uint8_t> act(cpu::activation_row_bytes(t, n));
  cpu::quantize_activations(t, x.data(), 1, n, act.data());
  py::array_t<float> out(n);
  float* o = out.mutable_data();
  const GGMLType at = cpu::activation_type(t);
  if (at == GGMLType::Q8_K) {
    const auto* b = reinterpret_cast<const quant::BlockQ8_K*>(act.data());
    for (int64_t i = 0; i < n; ++i)
      o[i] = b[i / quant::kQK_K].d * static_cast<float>(b[i / quant::kQK_K].qs[i % quant::kQK_K]);
  } else {
    quant::dequantize_row(at, act.data(), o, n);
  }
  return out;
}

float dot(const py::array& row, const std::string& type_name, const F32Array& x) {
  const GGMLType t = parse_supported(type_name);
  if (x.ndim() != 1) throw_error(ErrorKind::Value, "x must be one-dimensional");
  const int64_t n = x.shape(0);
  const uint8_t* w = bytes_of(row, quant::row_bytes(t, n), "row");
  return cpu::dot(t, w, x.data(), n);
}

// A supported file type, or the internal repacked form of one ("Q4_K_R16": cpu::repacked_type).
GGMLType parse_kernel_type(const std::string& name) {
  constexpr std::string_view kSuffix = "_R16";
  if (name.size() > kSuffix.size() && name.ends_with(kSuffix))
    if (const auto plain = quant::type_from_name(name.substr(0, name.size() - kSuffix.size()))) {
      const GGMLType t = cpu::repacked_type(*plain);
      if (t != *plain && name == quant::type_name(t)) return t;  // spelled exactly, as the type's name
    }
  return parse_supported(name);
}

// (bytes in the repacked layout, its type name) of a matrix of a type with a repacked form (cpu/repack/repack.h).
py::tuple repack(const py::array& weights, const std::string& type_name, int64_t rows, int64_t cols) {
  const GGMLType t = parse_supported(type_name);
  checked_dim(rows, "rows");
  checked_dim(cols, "cols");
  const std::size_t bytes = quant::row_bytes(t, cols) * static_cast<std::size_t>(rows);
  const uint8_t* w = bytes_of(weights, bytes, "weights");
  py::array_t<uint8_t> out(static_cast<py::ssize_t>(bytes));
  cpu::repack_rows(t, w, rows, cols, out.mutable_data());
  return py::make_tuple(out, std::string(quant::type_name(cpu::repacked_type(t))));
}

py::array_t<float> gemm(const py::array& weights, const std::string& type_name, int64_t rows, int64_t cols,
                        const F32Array& X, bool threaded) {
  const GGMLType t = parse_kernel_type(type_name);
  checked_dim(rows, "rows");
  checked_dim(cols, "cols");
  const bool vector = X.ndim() == 1;
  if (X.ndim() != 1 && X.ndim() != 2) throw_error(ErrorKind::Value, "x must be one- or two-dimensional");
  const int64_t nx = vector ? 1 : X.shape(0);
  if (X.shape(X.ndim() - 1) != cols)
    throw_error(ErrorKind::Value,
                "x has " + std::to_string(X.shape(X.ndim() - 1)) + " columns, weights " + std::to_string(cols));
  const uint8_t* w = bytes_of(weights, quant::row_bytes(t, cols) * static_cast<std::size_t>(rows), "weights");
  py::array_t<float> out = vector ? py::array_t<float>(rows) : py::array_t<float>({nx, rows});
  const float* xs = X.data();
  float* y = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    cpu::gemm(t, w, rows, cols, xs, nx, y, threaded ? &ThreadPool::global() : nullptr);
  }
  return out;
}

}  // namespace

void bind_quant(py::module_& parent) {
  py::module_ m = parent.def_submodule("quant", "block formats, quantizers and CPU dot kernels");
  m.def(
      "types",
      [] {
        std::vector<std::string> v;
        for (uint32_t id = 0; id < 64; ++id)
          if (auto t = quant::type_from_id(id); t && quant::type_supported(*t)) v.emplace_back(quant::type_name(*t));
        return v;
      },
      "Names of the types with dequantize and dot kernels");
  m.def("block_size", [](const std::string& t) { return quant::block_size(parse_type(t)); }, py::arg("type"));
  m.def("type_size", [](const std::string& t) { return quant::type_size(parse_type(t)); }, py::arg("type"));
  m.def(
      "row_bytes", [](const std::string& t, int64_t n) { return quant::row_bytes(parse_type(t), n); }, py::arg("type"),
      py::arg("n"));
  m.def(
      "activation_type",
      [](const std::string& t) { return std::string(quant::type_name(cpu::activation_type(parse_supported(t)))); },
      py::arg("type"));
  m.def(
      "has_quantizer",
      [](const std::string& t, const std::string& method) {
        return quant::has_quantizer(parse_type(t), parse_method(method));
      },
      py::arg("type"), py::arg("method"));
  m.def("quantize", &quantize, py::arg("array"), py::arg("type"), py::arg("method") = "ggml");
  m.def("dequantize", &dequantize, py::arg("data"), py::arg("type"), py::arg("shape"));
  m.def("activation_values", &activation_values, py::arg("x"), py::arg("type"));
  m.def("repack", &repack, py::arg("weights"), py::arg("type"), py::arg("rows"), py::arg("cols"),
        "(bytes, type name) of a matrix of a type with a repacked form (Q4_0, Q5_0, Q5_1, Q8_0, the K-quants, IQ4_XS, "
        "IQ4_NL) "
        "in the interleaved 16-row layout (rows a multiple of 16)");
  m.def("dot", &dot, py::arg("row"), py::arg("type"), py::arg("x"));
  m.def("gemm", &gemm, py::arg("weights"), py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("x"),
        py::arg("threaded") = true);
  m.def(
      "read_bandwidth",
      [](std::size_t bytes, int threads, int reps) {
        cpu::ReadBandwidth r;
        {
          py::gil_scoped_release nogil;
          r = cpu::measure_read_bandwidth(bytes, threads, reps);
        }
        return r.gb_per_s;
      },
      py::arg("bytes"), py::arg("threads"), py::arg("reps"), "Best streaming-read GB/s over reps passes");
}

}  // namespace strata::bindings
