#include "strata/gguf/gguf_file.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>

#include "strata/gguf/byte_cursor.h"
#include "strata/util/error.h"

namespace strata::gguf {
namespace {

// "file truncated: <field> of <owner> needs n bytes but only m remain", checked before a read so
// the message can name what was being read.
void need(const ByteCursor& c, uint64_t n, const char* field, const std::string& owner) {
  if (n > c.remaining())
    c.fail(std::string("file truncated: ") + field + " of " + owner + " needs " + std::to_string(n) +
           " bytes but only " + std::to_string(c.remaining()) + " remain");
}

// The fewest bytes a metadata entry (key length, type id, 1-byte value) and a tensor info
// (name length, n_dims, type id, offset) can take: counts are checked against these before
// anything is reserved.
constexpr uint64_t kMinEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
// Arrays copied out by the getters reserve at most this much up front (the elements are in the
// file, so the vectors only grow as far as the file's own bytes allow).
constexpr uint64_t kReserveCap = uint64_t{1} << 20;

uint32_t byteswap32(uint32_t v) { return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24); }

std::string hex_bytes(const uint8_t* p, std::size_t n) {
  std::string out;
  char buf[4];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%s%02x", i ? " " : "", p[i]);
    out += buf;
  }
  return out;
}

std::string range(uint64_t begin, uint64_t end) {
  char buf[64];  // built with snprintf: GCC 12 misreports -Wrestrict on chained std::string +
  std::snprintf(buf, sizeof buf, "[%llu, %llu)", static_cast<unsigned long long>(begin),
                static_cast<unsigned long long>(end));
  return buf;
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // cannot overflow: checked when the file was opened
  return n;
}

std::unique_ptr<File> File::open(const std::string& path, MmapFile::Access access) {
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->map_ = std::make_unique<MmapFile>(path, access);
  f->data_ = f->map_->data();
  f->size_ = f->map_->size();
  f->parse();
  return f;
}

std::unique_ptr<File> File::open_memory(const uint8_t* data, std::size_t size, const std::string& name) {
  std::unique_ptr<File> f(new File());
  f->path_ = name;
  f->owned_.assign(data, data + size);
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse();
  return f;
}

const MmapFile& File::mapping() const {
  if (!map_) throw_file_error(ErrorKind::Value, path_, "opened from memory, there is no file mapping");
  return *map_;
}

void File::parse() {
  ByteCursor c(data_, size_, 0, path_);
  if (size_ == 0) c.fail("empty file, not a GGUF file");
  if (size_ >= 4 && ByteCursor::load<uint32_t>(data_) != kMagic)
    c.fail("not a GGUF file (magic bytes " + hex_bytes(data_, 4) + ", expected 47 47 55 46 \"GGUF\")");
  (void)c.u32("GGUF magic");

  const uint64_t version_at = c.offset();
  version_ = c.u32("GGUF version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = byteswap32(version_);
    if (swapped >= 1 && swapped <= 3)
      c.fail_at(version_at, "big-endian GGUF (version field " + hex_bytes(data_ + 4, 4) +
                                ") is not supported; strata reads little-endian GGUF only");
    if (version_ == 1) c.fail_at(version_at, "GGUF version 1 is not supported (strata reads versions 2 and 3)");
    c.fail_at(version_at, "unsupported GGUF version " + std::to_string(version_) + " (strata reads versions 2 and 3)");
  }

  const uint64_t tensor_count_at = c.offset();
  const uint64_t tensor_count = c.u64("tensor count");
  const uint64_t kv_count_at = c.offset();
  const uint64_t kv_count = c.u64("metadata key-value count");
  if (kv_count > kMaxKeyValues)
    c.fail_at(kv_count_at, "metadata key-value count " + std::to_string(kv_count) + " exceeds the limit of " +
                               std::to_string(kMaxKeyValues));
  if (tensor_count > kMaxTensors)
    c.fail_at(tensor_count_at,
              "tensor count " + std::to_string(tensor_count) + " exceeds the limit of " + std::to_string(kMaxTensors));
  if (kv_count > c.remaining() / kMinEntryBytes)
    c.fail_at(kv_count_at, "metadata key-value count " + std::to_string(kv_count) + " cannot fit in the " +
                               std::to_string(c.remaining()) + " bytes left in the file");
  if (tensor_count > c.remaining() / kMinTensorInfoBytes)
    c.fail_at(tensor_count_at, "tensor count " + std::to_string(tensor_count) + " cannot fit in the " +
                                   std::to_string(c.remaining()) + " bytes left in the file");

  // ---- metadata
  // Reserve what is plausible; a larger (still capped) count grows as entries actually parse.
  entries_.reserve(static_cast<std::size_t>(std::min<uint64_t>(kv_count, 4096)));
  key_index_.reserve(static_cast<std::size_t>(std::min<uint64_t>(kv_count, 4096)));
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t entry_at = c.offset();
    const std::string entry_name = "metadata entry " + std::to_string(i);
    need(c, 8, "key length", entry_name);
    const std::string_view key = c.str(("key of " + entry_name).c_str());
    if (key.empty()) c.fail_at(entry_at, entry_name + " has an empty key");
    if (key.size() > kMaxNameBytes)
      c.fail_at(entry_at, entry_name + ": key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                              std::to_string(kMaxNameBytes));
    const std::string what = "key " + quoted(key);
    const uint64_t type_at = c.offset();
    need(c, 4, "value type", what);
    const uint32_t type_id = c.u32("value type");
    const auto type = value_type_from_id(type_id);
    if (!type) c.fail_at(type_at, what + ": unknown value type id " + std::to_string(type_id));
    Value v = Value::read(c, *type, what);
    if (!key_index_.emplace(std::string(key), entries_.size()).second)
      c.fail_at(entry_at, "duplicate key " + quoted(key));
    entries_.push_back({std::string(key), v});
  }

  if (const Value* a = find("general.alignment")) {
    if (!a->is_integer())
      c.fail_at(a->offset(), "general.alignment has type " + a->type_description() + ", expected uint32");
    const auto al = a->to_u64();
    if (!al || *al == 0 || (*al & (*al - 1)) != 0)
      c.fail_at(a->offset(), "general.alignment " + (al ? std::to_string(*al) : std::to_string(*a->to_i64())) +
                                 " is not a power of two");
    if (*al > kMaxAlignment)
      c.fail_at(a->offset(), "general.alignment " + std::to_string(*al) + " exceeds the maximum of " +
                                 std::to_string(kMaxAlignment));
    alignment_ = *al;
  }

  // ---- tensor infos (re-checked against what is left after the metadata)
  if (tensor_count > c.remaining() / kMinTensorInfoBytes)
    c.fail_at(tensor_count_at, "tensor count " + std::to_string(tensor_count) + " cannot fit in the " +
                                   std::to_string(c.remaining()) + " bytes left after the metadata");
  parse_tensor_infos(c, tensor_count);
}

void File::parse_tensor_infos(ByteCursor& c, uint64_t count) {
  const auto plausible = static_cast<std::size_t>(std::min<uint64_t>(count, 65536));
  tensors_.reserve(plausible);
  tensor_index_.reserve(plausible);
  std::vector<uint64_t> info_offsets;
  info_offsets.reserve(plausible);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t info_at = c.offset();
    const std::string info_name = "tensor info " + std::to_string(i);
    need(c, 8, "name length", info_name);
    const std::string_view name = c.str(("name of " + info_name).c_str());
    if (name.empty()) c.fail_at(info_at, "tensor " + std::to_string(i) + " has an empty name");
    if (name.size() > kMaxNameBytes)
      c.fail_at(info_at, "tensor " + std::to_string(i) + ": name of " + std::to_string(name.size()) +
                             " bytes exceeds the limit of " + std::to_string(kMaxNameBytes));
    const std::string what = "tensor " + quoted(name);

    const uint64_t dims_at = c.offset();
    need(c, 4, "dimension count", what);
    const uint32_t n_dims = c.u32("tensor dimension count");
    if (n_dims > kMaxDims)
      c.fail_at(dims_at,
                what + ": n_dims " + std::to_string(n_dims) + " exceeds the maximum of " + std::to_string(kMaxDims));
    TensorInfo t;
    t.name = std::string(name);
    t.ne.resize(n_dims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = c.offset();
      need(c, 8, "dimensions", what);
      const int64_t ne = c.i64("tensor dimension");
      if (ne <= 0)
        c.fail_at(dim_at,
                  what + ": dimension " + std::to_string(d) + " is " + std::to_string(ne) + ", must be positive");
      if (__builtin_mul_overflow(n_elements, ne, &n_elements))
        c.fail_at(dim_at, what + ": element count overflows 64 bits");
      t.ne[d] = ne;
    }
    const uint64_t type_at = c.offset();
    need(c, 4 + 8, "type and data offset", what);
    const uint32_t type_id = c.u32("tensor type");
    const auto type = quant::type_from_id(type_id);
    if (!type) c.fail_at(type_at, what + ": unknown ggml type id " + std::to_string(type_id));
    t.type = *type;
    t.offset = c.u64("tensor data offset");  // relative for now; made absolute in place_tensors

    const quant::TypeInfo& ti = quant::type_info(t.type);
    const int64_t ne0 = n_dims ? t.ne[0] : 1;
    if (ne0 % ti.block_size != 0)
      c.fail_at(dims_at, what + ": ne[0] = " + std::to_string(ne0) + " is not a multiple of the " + ti.name +
                             " block size " + std::to_string(ti.block_size));
    const uint64_t blocks = static_cast<uint64_t>(n_elements / ti.block_size);
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(ti.type_size), &t.nbytes))
      c.fail_at(dims_at, what + ": size in bytes overflows 64 bits");

    if (!tensor_index_.emplace(t.name, tensors_.size()).second)
      c.fail_at(info_at, "duplicate tensor name " + quoted(name));
    tensors_.push_back(std::move(t));
    info_offsets.push_back(info_at);
  }
  place_tensors(c, info_offsets);
}

void File::place_tensors(ByteCursor& c, const std::vector<uint64_t>& info_offsets) {
  // The data section starts at the first aligned offset after the tensor infos. A file without
  // tensors may end before it.
  const uint64_t infos_end = c.offset();
  data_offset_ = (infos_end + alignment_ - 1) / alignment_ * alignment_;  // no overflow: both < 2^63
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo& t = tensors_[i];
    const std::string what = "tensor " + quoted(t.name);
    const uint64_t rel = t.offset;
    if (rel % alignment_ != 0)
      c.fail_at(info_offsets[i], what + ": data offset " + std::to_string(rel) +
                                     " is not a multiple of the alignment " + std::to_string(alignment_));
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_offset_, rel, &begin) || __builtin_add_overflow(begin, t.nbytes, &end) ||
        end > size_)
      c.fail_at(info_offsets[i], what + ": data (" + std::to_string(t.nbytes) + " bytes at data offset " +
                                     std::to_string(rel) + ") extends past the end of the file (" +
                                     std::to_string(size_) + " bytes)");
    t.offset = begin;
  }
  std::vector<std::size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    if (prev.offset + prev.nbytes > cur.offset)
      c.fail_at(info_offsets[order[k]], "tensors " + quoted(prev.name) + " " +
                                            range(prev.offset, prev.offset + prev.nbytes) + " and " + quoted(cur.name) +
                                            " " + range(cur.offset, cur.offset + cur.nbytes) + " overlap");
  }
}

// ---- lookups and typed getters

const Value* File::find(const std::string& key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &entries_[it->second].value;
}

void File::key_error(const std::string& key, const std::string& what) const {
  throw_file_error(ErrorKind::Format, path_, "key " + quoted(key) + " " + what);
}

const Value& File::value(const std::string& key) const {
  const Value* v = find(key);
  if (!v) key_error(key, "missing");
  return *v;
}

ValueType File::type_of(const std::string& key) const { return value(key).type(); }

const TensorInfo* File::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// Convert an integer Value to T when it fits; describe the value for the error otherwise.
template <class T>
bool fits(const Value& v, T& out) {
  if constexpr (std::is_signed_v<T>) {
    const auto s = v.to_i64();
    if (!s || *s < std::numeric_limits<T>::min() || *s > std::numeric_limits<T>::max()) return false;
    out = static_cast<T>(*s);
  } else {
    const auto u = v.to_u64();
    if (!u || *u > std::numeric_limits<T>::max()) return false;
    out = static_cast<T>(*u);
  }
  return true;
}

std::string describe_integer(const Value& v) {
  if (const auto s = v.to_i64()) return std::to_string(*s);
  return std::to_string(*v.to_u64());
}

template <class T>
constexpr const char* int_name() {
  if constexpr (std::is_same_v<T, uint32_t>)
    return "uint32";
  else if constexpr (std::is_same_v<T, int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, uint64_t>)
    return "uint64";
  else
    return "int64";
}

template <class T>
T get_integer(const File& f, const Value& v, const std::string& key) {
  if (!v.is_integer())
    throw_file_error(ErrorKind::Format, f.path(),
                     "key " + quoted(key) + " has type " + v.type_description() + ", expected " + int_name<T>());
  T out{};
  if (!fits(v, out))
    throw_file_error(ErrorKind::Format, f.path(),
                     "key " + quoted(key) + " = " + describe_integer(v) + " does not fit in " + int_name<T>());
  return out;
}

template <class T>
std::vector<T> get_integer_array(const File& f, const Value& v, const std::string& key) {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(std::min<uint64_t>(v.size(), kReserveCap)));
  v.for_each([&](const Value& e) {
    T x{};
    if (!fits(e, x))
      throw_file_error(ErrorKind::Format, f.path(),
                       "key " + quoted(key) + "[" + std::to_string(out.size()) + "] = " + describe_integer(e) +
                           " does not fit in " + int_name<T>());
    out.push_back(x);
  });
  return out;
}

// double -> float without undefined behaviour: out-of-range values become +-inf (NaN stays NaN).
float narrow_to_float(double d) {
  if (d > static_cast<double>(std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
  if (d < -static_cast<double>(std::numeric_limits<float>::max())) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(d);
}

bool integer_elements(ValueType t) { return is_integer_type(t); }
bool number_elements(ValueType t) { return is_integer_type(t) || is_float_type(t); }
bool string_elements(ValueType t) { return t == ValueType::STRING; }

}  // namespace

const Value& File::typed(const std::string& key, ValueType t) const {
  const Value& v = value(key);
  if (v.type() != t) key_error(key, "has type " + v.type_description() + ", expected " + value_type_name(t));
  return v;
}

const Value& File::array_of(const std::string& key, bool (*elem_ok)(ValueType), const char* expected) const {
  const Value& v = value(key);
  if (v.type() != ValueType::ARRAY || !elem_ok(v.element_type()))
    key_error(key, "has type " + v.type_description() + ", expected " + expected);
  return v;
}

uint32_t File::get_u32(const std::string& key) const { return get_integer<uint32_t>(*this, value(key), key); }
uint32_t File::get_u32(const std::string& key, uint32_t def) const { return has(key) ? get_u32(key) : def; }
int32_t File::get_i32(const std::string& key) const { return get_integer<int32_t>(*this, value(key), key); }
int32_t File::get_i32(const std::string& key, int32_t def) const { return has(key) ? get_i32(key) : def; }
uint64_t File::get_u64(const std::string& key) const { return get_integer<uint64_t>(*this, value(key), key); }
uint64_t File::get_u64(const std::string& key, uint64_t def) const { return has(key) ? get_u64(key) : def; }
int64_t File::get_i64(const std::string& key) const { return get_integer<int64_t>(*this, value(key), key); }
int64_t File::get_i64(const std::string& key, int64_t def) const { return has(key) ? get_i64(key) : def; }

double File::get_f64(const std::string& key) const {
  const Value& v = value(key);
  if (!v.is_number()) key_error(key, "has type " + v.type_description() + ", expected a number");
  return v.to_f64();
}
float File::get_f32(const std::string& key) const {
  const Value& v = value(key);
  if (!v.is_number()) key_error(key, "has type " + v.type_description() + ", expected float32");
  return narrow_to_float(v.to_f64());
}
float File::get_f32(const std::string& key, float def) const { return has(key) ? get_f32(key) : def; }

bool File::get_bool(const std::string& key) const { return typed(key, ValueType::BOOL).to_bool(); }
bool File::get_bool(const std::string& key, bool def) const { return has(key) ? get_bool(key) : def; }

std::string File::get_string(const std::string& key) const {
  return std::string(typed(key, ValueType::STRING).to_string());
}
std::string File::get_string(const std::string& key, const std::string& def) const {
  return has(key) ? get_string(key) : def;
}

std::vector<std::string> File::get_string_array(const std::string& key) const {
  const Value& v = array_of(key, string_elements, "array[string]");
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(std::min<uint64_t>(v.size(), kReserveCap)));
  v.for_each([&](const Value& e) { out.emplace_back(e.to_string()); });
  return out;
}

std::vector<int32_t> File::get_i32_array(const std::string& key) const {
  return get_integer_array<int32_t>(*this, array_of(key, integer_elements, "an integer array"), key);
}
std::vector<uint32_t> File::get_u32_array(const std::string& key) const {
  return get_integer_array<uint32_t>(*this, array_of(key, integer_elements, "an integer array"), key);
}
std::vector<int64_t> File::get_i64_array(const std::string& key) const {
  return get_integer_array<int64_t>(*this, array_of(key, integer_elements, "an integer array"), key);
}

std::vector<float> File::get_f32_array(const std::string& key) const {
  const Value& v = array_of(key, number_elements, "a numeric array");
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(std::min<uint64_t>(v.size(), kReserveCap)));
  v.for_each([&](const Value& e) { out.push_back(narrow_to_float(e.to_f64())); });
  return out;
}

}  // namespace strata::gguf
