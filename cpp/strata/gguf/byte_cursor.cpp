#include "strata/gguf/byte_cursor.h"

#include "strata/util/error.h"

namespace strata::gguf {

std::string quoted(std::string_view s) {
  static constexpr std::size_t kMaxShown = 96;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

void ByteCursor::fail_at(uint64_t abs_offset, const std::string& what) const {
  throw_file_error(ErrorKind::Format, *path_, what + " (at byte offset " + std::to_string(abs_offset) + ")");
}

void ByteCursor::fail_truncated(uint64_t n, const char* what) const {
  fail(std::string("file truncated: ") + what + " needs " + std::to_string(n) + " bytes but only " +
       std::to_string(remaining()) + " remain");
}

std::string_view ByteCursor::str(const char* what) {
  const uint64_t len_at = offset();
  const uint64_t len = u64(what);
  if (len > remaining())
    fail_at(len_at, std::string(what) + ": string length " + std::to_string(len) + " exceeds the " +
                        std::to_string(remaining()) + " bytes left in the file");
  const uint8_t* p = take(len, what);
  return {reinterpret_cast<const char*>(p), static_cast<std::size_t>(len)};
}

}  // namespace strata::gguf
