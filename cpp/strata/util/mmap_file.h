#pragma once
// A read-only memory map of a whole file. Opening never trusts the file: size and contents are
// validated by the readers built on top of it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

class MmapFile {
 public:
  // random_access: MADV_RANDOM from the start, so a page fault reads only its own page (no
  // read-around). The expert store's stream mode asks for it: read-around of a non-expert tensor
  // would pull neighbouring expert bytes into the page cache (experts/mapping_advice.h).
  explicit MmapFile(const std::string& path, bool random_access = false);
  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  const uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }
  int fd() const noexcept { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace strata
