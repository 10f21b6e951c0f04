#include "strata/gguf/metadata_value.h"

#include "strata/util/error.h"

namespace strata::gguf {
namespace {

// The fewest bytes one element of `t` can take: what an array's count is checked against
// before anything is walked or allocated.
uint64_t min_element_bytes(ValueType t) {
  if (t == ValueType::STRING) return 8;     // the length field
  if (t == ValueType::ARRAY) return 4 + 8;  // element type + count
  return value_type_size(t);
}

ValueType read_type_id(ByteCursor& c, const std::string& what, const char* field) {
  const uint64_t at = c.offset();
  const uint32_t id = c.u32(field);
  const auto t = value_type_from_id(id);
  if (!t) c.fail_at(at, what + ": unknown value type id " + std::to_string(id));
  return *t;
}

}  // namespace

Value Value::read(ByteCursor& c, ValueType type, const std::string& what, int depth) {
  // Messages are built only on failure: this runs once per element of a 250k-token array.
  const auto need = [&](uint64_t n, const char* field) {
    if (n > c.remaining())
      c.fail(std::string("file truncated: ") + field + " of " + what + " needs " + std::to_string(n) +
             " bytes but only " + std::to_string(c.remaining()) + " remain");
  };
  Value v;
  v.path_ = &c.path();
  v.type_ = type;
  v.offset_ = c.offset();
  v.data_ = c.here();
  switch (type) {
    case ValueType::STRING: {
      need(8, "string length");
      const uint64_t len = c.u64("string length");
      if (len > c.remaining())
        c.fail_at(v.offset_, what + ": string length " + std::to_string(len) + " exceeds the " +
                                 std::to_string(c.remaining()) + " bytes left in the file");
      (void)c.take(len, "string bytes");
      break;
    }
    case ValueType::BOOL: {
      need(1, "bool value");
      const uint8_t b = c.u8("bool value");
      if (b > 1) c.fail_at(v.offset_, what + ": bool value " + std::to_string(b) + " is not 0 or 1");
      break;
    }
    case ValueType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        c.fail(what + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
      need(4, "array element type");
      v.elem_type_ = read_type_id(c, what, "array element type");
      need(8, "array length");
      const uint64_t count_at = c.offset();
      v.count_ = c.u64("array length");
      const uint64_t min_bytes = min_element_bytes(v.elem_type_);
      if (v.count_ > c.remaining() / min_bytes)
        c.fail_at(count_at, what + ": array length " + std::to_string(v.count_) + " of " +
                                value_type_name(v.elem_type_) + " cannot fit in the " + std::to_string(c.remaining()) +
                                " bytes left in the file");
      if (v.elem_type_ == ValueType::BOOL) {
        const uint8_t* p = c.here();
        for (uint64_t i = 0; i < v.count_; ++i)
          if (p[i] > 1)
            c.fail_at(c.offset() + i,
                      what + ": bool element " + std::to_string(i) + " is " + std::to_string(p[i]) + ", not 0 or 1");
        (void)c.take(v.count_, "bool array");
      } else if (const std::size_t sz = value_type_size(v.elem_type_); sz != 0) {
        (void)c.take(v.count_ * sz, "array elements");  // count * sz <= remaining: checked above
      } else {
        for (uint64_t i = 0; i < v.count_; ++i) (void)read(c, v.elem_type_, what, depth + 1);
      }
      break;
    }
    default:
      need(value_type_size(type), value_type_name(type));
      (void)c.take(value_type_size(type), value_type_name(type));
      break;
  }
  v.bytes_ = c.offset() - v.offset_;
  return v;
}

std::string Value::type_description() const {
  if (type_ != ValueType::ARRAY) return value_type_name(type_);
  return std::string("array[") + value_type_name(elem_type_) + "]";
}

void Value::require_type(ValueType t) const {
  if (type_ != t)
    throw_error(ErrorKind::Internal,
                std::string("GGUF value of type ") + value_type_name(type_) + " read as " + value_type_name(t));
}

std::optional<uint64_t> Value::to_u64() const {
  switch (type_) {
    case ValueType::UINT8: return ByteCursor::load<uint8_t>(data_);
    case ValueType::UINT16: return ByteCursor::load<uint16_t>(data_);
    case ValueType::UINT32: return ByteCursor::load<uint32_t>(data_);
    case ValueType::UINT64: return ByteCursor::load<uint64_t>(data_);
    default: {
      const auto s = to_i64();
      if (s && *s >= 0) return static_cast<uint64_t>(*s);
      return std::nullopt;
    }
  }
}

std::optional<int64_t> Value::to_i64() const {
  switch (type_) {
    case ValueType::INT8: return ByteCursor::load<int8_t>(data_);
    case ValueType::INT16: return ByteCursor::load<int16_t>(data_);
    case ValueType::INT32: return ByteCursor::load<int32_t>(data_);
    case ValueType::INT64: return ByteCursor::load<int64_t>(data_);
    case ValueType::UINT8:
    case ValueType::UINT16:
    case ValueType::UINT32:
    case ValueType::UINT64: {
      const uint64_t u = *to_u64();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

double Value::to_f64() const {
  switch (type_) {
    case ValueType::FLOAT32: return ByteCursor::load<float>(data_);
    case ValueType::FLOAT64: return ByteCursor::load<double>(data_);
    case ValueType::UINT64: return static_cast<double>(ByteCursor::load<uint64_t>(data_));
    default:
      if (is_integer()) return static_cast<double>(*to_i64());
      require_type(ValueType::FLOAT64);
      return 0.0;
  }
}

bool Value::to_bool() const {
  require_type(ValueType::BOOL);
  return data_[0] != 0;
}

std::string_view Value::to_string() const {
  require_type(ValueType::STRING);
  ByteCursor c(data_, bytes_, offset_, *path_);
  return c.str("string value");
}

void Value::for_each(const std::function<void(const Value&)>& fn, uint64_t limit) const {
  require_type(ValueType::ARRAY);
  // Re-walk the validated payload; the cursor is bounded by this value's own bytes.
  ByteCursor c(data_, bytes_, offset_, *path_);
  (void)c.take(12, "array header");
  const std::string what = "array element";
  // Depth restarts at 0: the nesting was already bounded when the file was opened.
  for (uint64_t i = 0; i < count_ && i < limit; ++i) fn(read(c, elem_type_, what, 0));
}

}  // namespace strata::gguf
