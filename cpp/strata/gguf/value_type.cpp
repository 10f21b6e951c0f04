#include "strata/gguf/value_type.h"

namespace strata::gguf {

std::optional<ValueType> value_type_from_id(uint32_t id) {
  if (id <= static_cast<uint32_t>(ValueType::FLOAT64)) return static_cast<ValueType>(id);
  return std::nullopt;
}

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

std::size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL: return 1;
    case ValueType::UINT16:
    case ValueType::INT16: return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32: return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64: return 8;
    case ValueType::STRING:
    case ValueType::ARRAY: return 0;
  }
  return 0;
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64: return true;
    default: return false;
  }
}

bool is_float_type(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

}  // namespace strata::gguf
