#include "strata/util/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "strata/util/error.h"

namespace strata {

MmapFile::MmapFile(const std::string& path, Access access) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; it is
  // refused below as not a regular file (the flag means nothing for the regular files we map).
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw_file_error(ErrorKind::IO, path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    throw_file_error(ErrorKind::IO, path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    const char* kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw_file_error(ErrorKind::IO, path, std::string("not a regular file (") + kind + ")");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) return;  // an empty file maps to nothing; readers report it as truncated
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd_);
    throw_file_error(ErrorKind::IO, path, std::string("cannot map: ") + std::strerror(e));
  }
  data_ = static_cast<const uint8_t*>(p);
  if (access == Access::Random) (void)::madvise(p, size_, MADV_RANDOM);  // advice only: failure changes nothing
}

MmapFile::~MmapFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace strata
