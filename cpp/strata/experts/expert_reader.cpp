#include "strata/experts/expert_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "strata/util/error.h"

namespace strata::experts {

const char* direct_io_name(DirectIo d) {
  switch (d) {
    case DirectIo::Auto: return "auto";
    case DirectIo::On: return "on";
    case DirectIo::Off: return "off";
  }
  return "?";
}

ExpertReader::ExpertReader(const std::string& path, DirectIo mode) : path_(path), mode_(mode) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    throw_file_error(ErrorKind::IO, path, std::string("cannot open for expert reads: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    throw_file_error(ErrorKind::IO, path, std::string("cannot stat: ") + std::strerror(e));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (mode == DirectIo::Off) {
    fallback_why_ = "direct I/O off";
    return;
  }
#if defined(__linux__)
  fd_direct_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd_direct_ < 0) {
    const std::string why = std::string("O_DIRECT refused: ") + std::strerror(errno);
    if (mode == DirectIo::On) {
      ::close(fd_);
      throw_file_error(ErrorKind::IO, path, why + " (direct I/O was required)");
    }
    fallback_why_ = why;
    return;
  }
#elif defined(__APPLE__)
  fd_direct_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_direct_ >= 0 && ::fcntl(fd_direct_, F_NOCACHE, 1) != 0) {
    ::close(fd_direct_);
    fd_direct_ = -1;
  }
  if (fd_direct_ < 0) {
    const std::string why = std::string("F_NOCACHE refused: ") + std::strerror(errno);
    if (mode == DirectIo::On) {
      ::close(fd_);
      throw_file_error(ErrorKind::IO, path, why + " (direct I/O was required)");
    }
    fallback_why_ = why;
    return;
  }
#else
  if (mode == DirectIo::On) {
    ::close(fd_);
    throw_file_error(ErrorKind::IO, path, "direct I/O is not available on this OS (direct I/O was required)");
  }
  fallback_why_ = "no direct I/O on this OS";
  return;
#endif
  direct_.store(true);
}

ExpertReader::~ExpertReader() {
  if (fd_direct_ >= 0) ::close(fd_direct_);
  if (fd_ >= 0) ::close(fd_);
}

std::string ExpertReader::note() const {
  if (direct()) {
#if defined(__APPLE__)
    return "direct I/O (F_NOCACHE)";
#else
    return "direct I/O (O_DIRECT)";
#endif
  }
  std::lock_guard<std::mutex> lock(note_mu_);
  return "buffered pread (" + fallback_why_ + ")";
}

void ExpertReader::set_pread_hook(PreadHook hook) { hook_ = std::move(hook); }

ssize_t ExpertReader::do_pread(int fd, void* buf, std::size_t n, uint64_t off, bool direct) {
  // Linux transfers at most 0x7ffff000 bytes per call; the callers loop.
  if (n > 0x40000000) n = 0x40000000;
  if (hook_) return hook_(fd, buf, n, off, direct);
  return ::pread(fd, buf, n, static_cast<off_t>(off));
}

void ExpertReader::fall_back(const std::string& why) {
  std::lock_guard<std::mutex> lock(note_mu_);
  if (direct_.exchange(false)) fallback_why_ = why;
}

void ExpertReader::fail(const ReadWhat& what, uint64_t offset, std::size_t len, const std::string& why) const {
  std::string msg = "reading ";
  if (what.expert >= 0)
    msg +=
        "expert " + std::to_string(what.expert) + " of layer " + std::to_string(what.layer) + " (" + what.part + ", ";
  else
    msg += "(";
  msg += std::to_string(len) + " bytes at offset " + std::to_string(offset) + "): " + why;
  throw_file_error(ErrorKind::IO, path_, msg);
}

uint64_t ExpertReader::read_buffered(uint64_t offset, std::size_t len, uint8_t* out, std::size_t done,
                                     const ReadWhat& what) {
  const std::size_t first = done;
  while (done < len) {
    const ssize_t r = do_pread(fd_, out + done, len - done, offset + done, false);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(what, offset, len, std::string(std::strerror(errno)) + " after " + std::to_string(done) + " bytes");
    }
    if (r == 0)
      fail(what, offset, len,
           "unexpected end of file after " + std::to_string(done) + " bytes (the file is " + std::to_string(size_) +
               " bytes; was it truncated?)");
    done += static_cast<std::size_t>(r);
  }
  return len - first;
}

uint64_t ExpertReader::read(uint64_t offset, std::size_t len, uint8_t* dst, const ReadWhat& what) {
  const std::size_t h = head(offset);
  if (len == 0) return 0;
  if (!direct()) return read_buffered(offset, len, dst + h, 0, what);

  const uint64_t base = offset - h;
  const std::size_t need = h + len;  // bytes of the span that must arrive
  const std::size_t want = span(offset, len);
  std::size_t done = 0;
  uint64_t transferred = 0;
  while (done < need) {
    const ssize_t r = do_pread(fd_direct_, dst + done, want - done, base + done, true);
    if (r < 0) {
      const int e = errno;
      if (e == EINTR) continue;
      if (e == EINVAL && done == 0 && mode_ == DirectIo::Auto) {
        // The file system accepted O_DIRECT at open but refuses the read: buffered from now on.
        fall_back(std::string("direct read refused: ") + std::strerror(e));
        return read_buffered(offset, len, dst + h, 0, what);
      }
      fail(what, offset, len, std::string(std::strerror(e)) + " (direct I/O) after " + std::to_string(done) + " bytes");
    }
    if (r == 0)
      fail(what, offset, len,
           "unexpected end of file after " + std::to_string(done > h ? done - h : 0) + " bytes (the file is " +
               std::to_string(size_) + " bytes; was it truncated?)");
    done += static_cast<std::size_t>(r);
    transferred += static_cast<uint64_t>(r);
    if (done < need && done % kAlign != 0) {
      // A short read that stopped mid-block: the rest cannot be read directly; finish buffered.
      const std::size_t got = done > h ? done - h : 0;
      return transferred + read_buffered(offset, len, dst + h, got, what);
    }
  }
  return transferred;
}

}  // namespace strata::experts
