#pragma once
// Builds GGUF files in memory for the C++ tests and the fuzz seeds, and records where the
// length/count/type fields lie so the fuzz driver can aim mutations at them. Header-only so
// test binaries can include it without a library.
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "strata/gguf/gguf_file.h"
#include "strata/quant/types.h"

namespace strata_gguf_build {

using strata::gguf::ValueType;
using strata::quant::GGMLType;

// Bytes plus the offsets (within them) of u64 count/length fields and u32 type/dim-count fields.
struct Blob {
  std::vector<uint8_t> bytes;
  std::vector<std::size_t> u64_fields;
  std::vector<std::size_t> u32_fields;

  template <class T>
  void put(T v) {
    const std::size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void put_u32_field(uint32_t v) {
    u32_fields.push_back(bytes.size());
    put(v);
  }
  void put_u64_field(uint64_t v) {
    u64_fields.push_back(bytes.size());
    put(v);
  }
  void put_string(const std::string& s) {
    put_u64_field(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void append(const Blob& o) {
    const std::size_t base = bytes.size();
    bytes.insert(bytes.end(), o.bytes.begin(), o.bytes.end());
    for (auto f : o.u64_fields) u64_fields.push_back(base + f);
    for (auto f : o.u32_fields) u32_fields.push_back(base + f);
  }
  void pad_to(std::size_t alignment, uint8_t fill = 0) {
    while (bytes.size() % alignment) bytes.push_back(fill);
  }
};

// A metadata value: its type and its payload (what follows the type id).
struct Val {
  ValueType type;
  Blob payload;
};

template <class T>
Val scalar(ValueType t, T v) {
  Val out{t, {}};
  out.payload.put(v);
  return out;
}
inline Val v_u8(uint8_t v) { return scalar(ValueType::UINT8, v); }
inline Val v_i8(int8_t v) { return scalar(ValueType::INT8, v); }
inline Val v_u16(uint16_t v) { return scalar(ValueType::UINT16, v); }
inline Val v_i16(int16_t v) { return scalar(ValueType::INT16, v); }
inline Val v_u32(uint32_t v) { return scalar(ValueType::UINT32, v); }
inline Val v_i32(int32_t v) { return scalar(ValueType::INT32, v); }
inline Val v_f32(float v) { return scalar(ValueType::FLOAT32, v); }
inline Val v_bool(bool v) { return scalar(ValueType::BOOL, static_cast<uint8_t>(v)); }
inline Val v_u64(uint64_t v) { return scalar(ValueType::UINT64, v); }
inline Val v_i64(int64_t v) { return scalar(ValueType::INT64, v); }
inline Val v_f64(double v) { return scalar(ValueType::FLOAT64, v); }
inline Val v_str(const std::string& s) {
  Val out{ValueType::STRING, {}};
  out.payload.put_string(s);
  return out;
}
// An array of `elem`-typed values (each element's payload must be of that type).
inline Val v_array(ValueType elem, const std::vector<Val>& elems) {
  Val out{ValueType::ARRAY, {}};
  out.payload.put_u32_field(static_cast<uint32_t>(elem));
  out.payload.put_u64_field(elems.size());
  for (const auto& e : elems) out.payload.append(e.payload);
  return out;
}

struct TensorSpec {
  std::string name;
  GGMLType type;
  std::vector<int64_t> ne;
};

inline uint64_t tensor_nbytes(const TensorSpec& t) {
  int64_t rows = 1;
  for (std::size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
  const int64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
  return strata::quant::row_bytes(t.type, ne0) * static_cast<uint64_t>(rows);
}

// Deterministic tensor contents: byte k of tensor i.
inline uint8_t tensor_byte(std::size_t i, uint64_t k) { return static_cast<uint8_t>(i * 37 + k * 13 + 5); }

class Builder {
 public:
  explicit Builder(uint32_t version = 3) : version_(version) {}

  Builder& kv(const std::string& key, Val v) {
    kvs_.emplace_back(key, std::move(v));
    return *this;
  }
  Builder& tensor(const std::string& name, GGMLType type, std::vector<int64_t> ne) {
    tensors_.push_back({name, type, std::move(ne)});
    return *this;
  }
  // Adds general.alignment and lays the data out with it.
  Builder& alignment(uint32_t a) {
    alignment_ = a;
    return kv("general.alignment", v_u32(a));
  }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }

  // The whole file; `data_offset` (optional) receives the start of the data section.
  Blob build(uint64_t* data_offset = nullptr) const {
    Blob out;
    out.put<uint32_t>(strata::gguf::kMagic);
    out.put_u32_field(version_);
    out.put_u64_field(tensors_.size());
    out.put_u64_field(kvs_.size());
    for (const auto& [key, v] : kvs_) {
      out.put_string(key);
      out.put_u32_field(static_cast<uint32_t>(v.type));
      out.append(v.payload);
    }
    uint64_t rel = 0;
    for (const auto& t : tensors_) {
      out.put_string(t.name);
      out.put_u32_field(static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) out.put_u64_field(static_cast<uint64_t>(d));
      out.put_u32_field(static_cast<uint32_t>(t.type));
      out.put_u64_field(rel);
      rel += (tensor_nbytes(t) + alignment_ - 1) / alignment_ * alignment_;
    }
    out.pad_to(alignment_);
    if (data_offset) *data_offset = out.bytes.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const uint64_t n = tensor_nbytes(tensors_[i]);
      for (uint64_t k = 0; k < n; ++k) out.bytes.push_back(tensor_byte(i, k));
      out.pad_to(alignment_);
    }
    return out;
  }

 private:
  uint32_t version_;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, Val>> kvs_;
  std::vector<TensorSpec> tensors_;
};

// A small file with every value type, nested and empty arrays, and tensors of several types.
inline Builder rich_file(uint32_t alignment = 32) {
  Builder b;
  b.kv("general.architecture", v_str("strata"));
  if (alignment != 32) b.alignment(alignment);
  b.kv("t.u8", v_u8(200)).kv("t.i8", v_i8(-100)).kv("t.u16", v_u16(60000)).kv("t.i16", v_i16(-30000));
  b.kv("t.u32", v_u32(4000000000u)).kv("t.i32", v_i32(-2000000000)).kv("t.f32", v_f32(0.5f));
  b.kv("t.bool", v_bool(true)).kv("t.str", v_str("h\xc3\xa9llo")).kv("t.u64", v_u64(~uint64_t{0}));
  b.kv("t.i64", v_i64(-(int64_t{1} << 40))).kv("t.f64", v_f64(-2.25)).kv("t.f64big", v_f64(1e300));
  std::vector<Val> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(v_str("tok" + std::to_string(i)));
  b.kv("tokenizer.ggml.tokens", v_array(ValueType::STRING, tokens));
  b.kv("tokenizer.ggml.token_type", v_array(ValueType::INT32, {v_i32(1), v_i32(3), v_i32(-1)}));
  b.kv("t.f32s", v_array(ValueType::FLOAT32, {v_f32(1.5f), v_f32(-2.0f)}));
  b.kv("t.bools", v_array(ValueType::BOOL, {v_bool(true), v_bool(false)}));
  b.kv("t.empty", v_array(ValueType::UINT64, {}));
  b.kv("t.nested", v_array(ValueType::ARRAY, {v_array(ValueType::UINT16, {v_u16(1), v_u16(2)}),
                                              v_array(ValueType::STRING, {v_str("a"), v_str("")})}));
  b.tensor("token_embd.weight", GGMLType::F32, {4, 3});
  b.tensor("blk.0.attn_norm.weight", GGMLType::F16, {8});
  b.tensor("blk.0.ffn_down.weight", GGMLType::Q8_0, {64, 2});
  b.tensor("blk.0.ffn_up.weight", GGMLType::Q4_K, {256, 1, 1, 2});
  b.tensor("scalar", GGMLType::I32, {});
  return b;
}

}  // namespace strata_gguf_build
