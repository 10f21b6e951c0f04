#pragma once
// A read-only memory map of a whole file. Opening never trusts the file: size and contents are
// validated by the readers built on top of it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

class MmapFile {
 public:
  // Random: the reader touches a few scattered pages (a header, small tensors), so page faults read
  // only their own page instead of the kernel's read-around (which would pull in neighbouring data).
  enum class Access { Normal, Random };
  explicit MmapFile(const std::string& path, Access access = Access::Normal);
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
