// strata._strata.GGUFFile: the C++ GGUF reader for Python (wrapped by strata.gguf.GGUFFile).
// Metadata converts to Python values on request; numeric arrays become numpy arrays (one copy)
// and tensor bytes are read-only numpy views into the mapping that keep the file alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "bindings/bindings.h"
#include "strata/gguf/gguf_file.h"
#include "strata/util/error.h"

namespace py = pybind11;
using strata::gguf::File;
using strata::gguf::Value;
using strata::gguf::ValueType;

namespace strata::bindings {
namespace {

// GGUF strings are bytes; invalid UTF-8 (hostile or odd files) becomes U+FFFD rather than an error.
py::str decode(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

const char* numpy_dtype(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "<u1";
    case ValueType::INT8: return "<i1";
    case ValueType::UINT16: return "<u2";
    case ValueType::INT16: return "<i2";
    case ValueType::UINT32: return "<u4";
    case ValueType::INT32: return "<i4";
    case ValueType::UINT64: return "<u8";
    case ValueType::INT64: return "<i8";
    case ValueType::FLOAT32: return "<f4";
    case ValueType::FLOAT64: return "<f8";
    case ValueType::BOOL: return "?";
    default: return nullptr;
  }
}

// A value as Python: int/float/bool/str; arrays of numbers or bools as numpy arrays, arrays of
// strings or arrays as lists. `max_items` >= 0 converts only that many leading elements (of
// nested arrays too).
py::object to_python(const Value& v, int64_t max_items) {
  switch (v.type()) {
    case ValueType::STRING: return decode(v.to_string());
    case ValueType::BOOL: return py::bool_(v.to_bool());
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return py::float_(v.to_f64());
    case ValueType::ARRAY: break;
    default:
      if (const auto s = v.to_i64()) return py::int_(*s);
      return py::int_(*v.to_u64());
  }
  uint64_t n = v.size();
  if (max_items >= 0 && static_cast<uint64_t>(max_items) < n) n = static_cast<uint64_t>(max_items);
  if (const char* dt = numpy_dtype(v.element_type())) {
    py::array out(py::dtype(dt), std::vector<py::ssize_t>{static_cast<py::ssize_t>(n)});
    std::memcpy(out.mutable_data(), v.raw_elements(), n * strata::gguf::value_type_size(v.element_type()));
    return out;
  }
  py::list out(static_cast<py::size_t>(n));
  py::size_t i = 0;
  v.for_each([&](const Value& e) { out[i++] = to_python(e, max_items); }, n);
  return out;
}

}  // namespace

void bind_gguf(py::module_& m) {
  py::class_<File>(m, "GGUFFile", "A validated, memory-mapped GGUF file (see strata.gguf.GGUFFile)")
      .def_static(
          "open", [](const std::string& path) { return File::open(path); }, py::arg("path"),
          py::call_guard<py::gil_scoped_release>(), "Map and validate a GGUF file")
      .def_static(
          "from_bytes",
          [](py::bytes data, const std::string& name) {
            const std::string_view b = data;
            return File::open_memory(reinterpret_cast<const uint8_t*>(b.data()), b.size(), name);
          },
          py::arg("data"), py::arg("name") = "<memory>", "Validate a GGUF held in memory (copied)")
      .def_property_readonly("path", &File::path)
      .def_property_readonly("version", &File::version)
      .def_property_readonly("alignment", &File::alignment)
      .def_property_readonly("data_offset", &File::data_offset)
      .def_property_readonly("file_size", &File::size)
      .def("has", &File::has, py::arg("key"))
      .def("keys",
           [](const File& f) {
             py::list out;
             for (const auto& e : f.metadata()) out.append(decode(e.key));
             return out;
           })
      .def(
          "value",
          [](const File& f, const std::string& key, int64_t max_items) { return to_python(f.value(key), max_items); },
          py::arg("key"), py::arg("max_items") = -1)
      .def(
          "value_type", [](const File& f, const std::string& key) { return f.value(key).type_description(); },
          py::arg("key"))
      .def(
          "array_length",
          [](const File& f, const std::string& key) -> py::object {
            const Value& v = f.value(key);
            if (v.type() != ValueType::ARRAY) return py::none();
            return py::int_(v.size());
          },
          py::arg("key"))
      .def(
          "metadata",
          [](const File& f, int64_t max_items) {
            py::dict out;
            for (const auto& e : f.metadata()) out[decode(e.key)] = to_python(e.value, max_items);
            return out;
          },
          py::arg("max_items") = -1)
      .def("metadata_types",
           [](const File& f) {
             py::dict out;
             for (const auto& e : f.metadata()) out[decode(e.key)] = e.value.type_description();
             return out;
           })
      .def(
          "tensors",
          [](const File& f) {
            py::list out;
            for (const auto& t : f.tensors())
              out.append(py::make_tuple(decode(t.name), strata::quant::type_name(t.type), static_cast<uint32_t>(t.type),
                                        py::tuple(py::cast(t.ne)), t.offset, t.nbytes));
            return out;
          },
          "(name, type name, type id, ne (innermost first), absolute offset, nbytes) per tensor, in file order")
      .def(
          "tensor_data",
          [](py::object self, const std::string& name) {
            const File& f = self.cast<const File&>();
            const auto* t = f.find_tensor(name);
            if (!t) strata::throw_file_error(strata::ErrorKind::Value, f.path(), "no tensor named '" + name + "'");
            // A view into the mapping; `self` is its base, so the file stays mapped while it lives.
            py::array out(py::dtype("u1"), {static_cast<py::ssize_t>(t->nbytes)}, {py::ssize_t{1}}, f.tensor_data(*t),
                          self);
            out.attr("setflags")(py::arg("write") = false);
            return out;
          },
          py::arg("name"), "The tensor's raw bytes: a read-only uint8 numpy view into the file");
}

}  // namespace strata::bindings
