#pragma once
// A GGUF (v2/v3, little-endian) model file, memory-mapped and validated when opened: header,
// every metadata value (nested arrays included), tensor infos, alignment, and that every tensor's
// data lies aligned, inside the file and apart from the others. After open() succeeds, tensor
// data pointers are safe to read for nbytes. A malformed file is strata::Error(Format)
// "<path>: <what> (at byte offset N)" — never a crash or an allocation sized by the file.
// What is checked and the messages: docs/gguf-reader.md.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/gguf/metadata_value.h"
#include "strata/gguf/value_type.h"
#include "strata/quant/types.h"
#include "strata/util/mmap_file.h"

namespace strata::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 24;  // 16 MiB: anything larger is refused
inline constexpr uint32_t kMaxDims = 4;                       // GGML_MAX_DIMS
// Sanity caps: far above any real model (tens of keys, thousands of tensors), low enough that a
// hostile count in a huge file cannot make the reader's tables outgrow memory.
inline constexpr uint64_t kMaxKeyValues = uint64_t{1} << 20;
inline constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
inline constexpr uint64_t kMaxNameBytes = 65535;  // keys and tensor names (the GGUF key limit)

struct TensorInfo {
  std::string name;
  quant::GGMLType type;
  std::vector<int64_t> ne;  // ne[0] innermost; every entry >= 1 (empty: a scalar)
  uint64_t offset;          // absolute byte offset in the file
  uint64_t nbytes;
  int64_t n_elements() const;
};

struct MetadataEntry {
  std::string key;
  Value value;
};

class File {
 public:
  // Map and validate a file. Throws strata::Error(IO) when it cannot be opened or mapped and
  // strata::Error(Format) when it is not a well-formed GGUF; both messages start with the path.
  static std::unique_ptr<File> open(const std::string& path, MmapFile::Access access = MmapFile::Access::Normal);
  // Validate a GGUF held in memory (the bytes are copied); `name` stands in for the path in
  // messages. Used by the fuzz target and tests; mapping() is unavailable for such a File.
  static std::unique_ptr<File> open_memory(const uint8_t* data, std::size_t size, const std::string& name);

  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute start of the tensor data section
  uint64_t size() const { return size_; }                // file size in bytes
  const uint8_t* data() const { return data_; }          // the whole file

  // ---- metadata
  bool has(const std::string& key) const { return key_index_.count(key) != 0; }
  const Value* find(const std::string& key) const;   // nullptr when absent
  const Value& value(const std::string& key) const;  // throws "key 'k' missing"
  ValueType type_of(const std::string& key) const;   // throws "key 'k' missing"
  // Keys in file order with their values, for inspection.
  const std::vector<MetadataEntry>& metadata() const { return entries_; }

  // Typed getters: throw Error(Format) "<path>: key 'k' missing" or "<path>: key 'k' has type X,
  // expected Y" or "<path>: key 'k' = V does not fit in T". Integer getters accept any integer
  // type whose value fits; float getters accept floats and integers; the overloads taking a
  // default return it when the key is absent (a present key of the wrong type still throws).
  uint32_t get_u32(const std::string& key) const;
  uint32_t get_u32(const std::string& key, uint32_t def) const;
  int32_t get_i32(const std::string& key) const;
  int32_t get_i32(const std::string& key, int32_t def) const;
  uint64_t get_u64(const std::string& key) const;
  uint64_t get_u64(const std::string& key, uint64_t def) const;
  int64_t get_i64(const std::string& key) const;
  int64_t get_i64(const std::string& key, int64_t def) const;
  float get_f32(const std::string& key) const;
  float get_f32(const std::string& key, float def) const;
  double get_f64(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& def) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int32_t> get_i32_array(const std::string& key) const;
  std::vector<uint32_t> get_u32_array(const std::string& key) const;
  std::vector<int64_t> get_i64_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;

  // ---- tensors (file order)
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;  // nullptr when absent
  const uint8_t* tensor_data(const TensorInfo& t) const { return data_ + t.offset; }
  // The mapping behind a File from open(); Error(Value) for one from open_memory().
  const MmapFile& mapping() const;

 private:
  File() = default;
  void parse();
  void parse_tensor_infos(ByteCursor& c, uint64_t count);
  void place_tensors(ByteCursor& c, const std::vector<uint64_t>& info_offsets);
  [[noreturn]] void key_error(const std::string& key, const std::string& what) const;
  const Value& typed(const std::string& key, ValueType t) const;
  const Value& array_of(const std::string& key, bool (*elem_ok)(ValueType), const char* expected) const;

  std::string path_;
  std::unique_ptr<MmapFile> map_;
  std::vector<uint8_t> owned_;  // open_memory only
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;

  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<MetadataEntry> entries_;
  std::unordered_map<std::string, std::size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace strata::gguf
