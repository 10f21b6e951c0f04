#pragma once
// A bounds-checked little-endian reader over a byte range of a GGUF file. Every read checks the
// bytes remaining first, so a hostile length can never make it read (or allocate) past the range;
// failures are strata::Error(Format) "<path>: <what> (at byte offset N)" with N absolute.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace strata::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

// Quote a key or tensor name for an error message: printable ASCII kept, other bytes as \xNN,
// cut at 96 bytes, so a hostile name can never break the one-line error.
std::string quoted(std::string_view s);

class ByteCursor {
 public:
  // `data` holds `size` bytes that start at absolute file offset `base`.
  ByteCursor(const uint8_t* data, uint64_t size, uint64_t base, const std::string& path)
      : data_(data), size_(size), base_(base), path_(&path) {}

  uint64_t offset() const { return base_ + pos_; }  // absolute file offset of the next byte
  uint64_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }
  const std::string& path() const { return *path_; }

  [[noreturn]] void fail(const std::string& what) const { fail_at(offset(), what); }
  [[noreturn]] void fail_at(uint64_t abs_offset, const std::string& what) const;

  // Fails with "file truncated: <what> needs n bytes but only m remain" when n > remaining().
  void require(uint64_t n, const char* what) const {
    if (n > remaining()) fail_truncated(n, what);
  }
  const uint8_t* take(uint64_t n, const char* what) {
    require(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint8_t u8(const char* what) { return *take(1, what); }
  uint32_t u32(const char* what) { return load<uint32_t>(take(4, what)); }
  uint64_t u64(const char* what) { return load<uint64_t>(take(8, what)); }
  int64_t i64(const char* what) { return load<int64_t>(take(8, what)); }
  // A GGUF string: u64 byte length then the bytes (not NUL-terminated, not validated as UTF-8).
  std::string_view str(const char* what);

  template <class T>
  static T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }

 private:
  [[noreturn]] void fail_truncated(uint64_t n, const char* what) const;

  const uint8_t* data_;
  uint64_t size_;
  uint64_t base_;
  uint64_t pos_ = 0;
  const std::string* path_;
};

}  // namespace strata::gguf
