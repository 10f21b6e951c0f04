#pragma once
// One GGUF metadata value, as a validated view of its bytes inside the file (no copy). Values are
// checked once when the file is opened; reading them later re-walks the same bounded byte range.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "strata/gguf/byte_cursor.h"
#include "strata/gguf/value_type.h"

namespace strata::gguf {

// Arrays of arrays are allowed by the format; deeper nesting than this is refused.
inline constexpr int kMaxArrayDepth = 8;

class Value {
 public:
  Value() = default;

  ValueType type() const { return type_; }
  uint64_t offset() const { return offset_; }        // absolute offset of the payload
  uint64_t payload_bytes() const { return bytes_; }  // bytes of the payload (after the type id)
  // "uint32", "string", "array[string]", "array[array]", ...
  std::string type_description() const;

  // Scalars. Integers convert only when the value fits (nullopt otherwise or for non-integers).
  bool is_integer() const { return is_integer_type(type_); }
  bool is_number() const { return is_integer_type(type_) || is_float_type(type_); }
  std::optional<uint64_t> to_u64() const;
  std::optional<int64_t> to_i64() const;
  double to_f64() const;               // any numeric type; Internal error otherwise
  bool to_bool() const;                // BOOL only
  std::string_view to_string() const;  // STRING only

  // Arrays (ARRAY only).
  ValueType element_type() const { return elem_type_; }
  uint64_t size() const { return count_; }
  // The packed little-endian elements of an array of a fixed-size type (size() * element size bytes,
  // not necessarily aligned).
  const uint8_t* raw_elements() const { return data_ + 12; }
  // Each element in order (the first `limit` only), as a Value of element_type().
  void for_each(const std::function<void(const Value&)>& fn, uint64_t limit = UINT64_MAX) const;

  // Validate the value of `type` at the cursor, advance past it and return its view. `what` names
  // the key for messages. Throws strata::Error(Format) on anything malformed.
  static Value read(ByteCursor& c, ValueType type, const std::string& what, int depth = 0);

 private:
  void require_type(ValueType t) const;

  const std::string* path_ = nullptr;
  const uint8_t* data_ = nullptr;  // payload start
  uint64_t offset_ = 0;
  uint64_t bytes_ = 0;
  ValueType type_ = ValueType::UINT8;
  ValueType elem_type_ = ValueType::UINT8;  // arrays only
  uint64_t count_ = 0;                      // arrays only
};

}  // namespace strata::gguf
