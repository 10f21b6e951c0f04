#pragma once
// GGUF metadata value types: ids as stored in the file, names, fixed sizes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace strata::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// nullopt for an id the format does not define.
std::optional<ValueType> value_type_from_id(uint32_t id);
// "uint8", "int32", "float32", "bool", "string", "array", ...
const char* value_type_name(ValueType t);
// Bytes of one value of a fixed-size type; 0 for STRING and ARRAY.
std::size_t value_type_size(ValueType t);
bool is_integer_type(ValueType t);
bool is_float_type(ValueType t);

}  // namespace strata::gguf
