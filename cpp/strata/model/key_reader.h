#pragma once
// Typed access to one architecture's metadata keys ("<arch>.<key>") with the error messages every
// reader wants: a missing or out-of-range key is a Format error naming the key and the file.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/model/model_source.h"
#include "strata/util/error.h"

namespace strata::model {

// Typed key access with the error messages every caller wants.
class KeyReader {
 public:
  KeyReader(const ModelSource& src, std::string prefix) : src_(src), prefix_(std::move(prefix)) {}

  uint32_t u32(const std::string& key) const {
    auto v = src_.find_uint(prefix_ + key);
    if (!v) fail(key, "is missing");
    return checked(key, *v);
  }
  uint32_t u32(const std::string& key, uint32_t def) const {
    auto v = src_.find_uint(prefix_ + key);
    return v ? checked(key, *v) : def;
  }
  float f32(const std::string& key) const {
    auto v = src_.find_float(prefix_ + key);
    if (!v) fail(key, "is missing");
    return *v;
  }
  float f32(const std::string& key, float def) const {
    auto v = src_.find_float(prefix_ + key);
    return v ? *v : def;
  }
  bool flag(const std::string& key, bool def) const {
    auto v = src_.find_bool(prefix_ + key);
    return v ? *v : def;
  }
  // Arrays (absent = nullopt).
  std::optional<std::vector<uint32_t>> u32_array(const std::string& key) const {
    return src_.find_u32_array(prefix_ + key);
  }
  std::optional<std::vector<float>> f32_array(const std::string& key) const {
    return src_.find_f32_array(prefix_ + key);
  }
  std::optional<std::string> text(const std::string& key) const { return src_.find_string(prefix_ + key); }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw_file_error(ErrorKind::Format, src_.origin(), "key " + prefix_ + key + " " + what);
  }

 private:
  uint32_t checked(const std::string& key, uint64_t v) const {
    if (v > 0xFFFFFFFFull) fail(key, "= " + std::to_string(v) + " does not fit in u32");
    return static_cast<uint32_t>(v);
  }
  const ModelSource& src_;
  std::string prefix_;
};

}  // namespace strata::model
