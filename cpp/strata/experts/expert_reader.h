#pragma once
// Positioned reads of expert bytes from the model file, bypassing the page cache where the OS
// allows (Linux O_DIRECT, macOS F_NOCACHE) so that a miss costs what a cold SSD read costs.
//
// Direct I/O needs the file offset, the length and the memory address aligned (kAlign = 4096 covers
// every logical block size in use), so the reader always reads the aligned span around the wanted
// bytes into an aligned destination: the bytes [offset, offset+len) land at dst + head(offset)
// (head = offset % kAlign), exactly where a copy from the mmap would have the same alignment.
// No bounce buffer and no copy: the destination region (span(offset, len) bytes) is the slot.
//
// When O_DIRECT is refused (tmpfs, some network file systems: open or the first read fails with
// EINVAL) the reader falls back to buffered pread for good and says so in note(). Short reads are
// continued; end of file, or any other error, is strata::Error(IO) naming the file, what was read
// and why — never a partially filled expert passed off as weights.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include <sys/types.h>

#include "strata/experts/expert_mode.h"

namespace strata::experts {

// What a read is for, for error messages ("expert 3 of layer 1 (ffn_up_exps)").
struct ReadWhat {
  int layer = -1;
  int expert = -1;
  const char* part = "";
};

class ExpertReader {
 public:
  static constexpr std::size_t kAlign = 4096;

  ExpertReader(const std::string& path, DirectIo mode);
  ~ExpertReader();
  ExpertReader(const ExpertReader&) = delete;
  ExpertReader& operator=(const ExpertReader&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  bool direct() const { return direct_.load(std::memory_order_relaxed); }
  // "direct I/O (O_DIRECT)", or "buffered pread (<why>)".
  std::string note() const;

  static std::size_t head(uint64_t offset) { return static_cast<std::size_t>(offset % kAlign); }
  // Bytes of the aligned span holding [offset, offset+len).
  static std::size_t span(uint64_t offset, std::size_t len) {
    return (head(offset) + len + kAlign - 1) / kAlign * kAlign;
  }

  // Reads [offset, offset+len) to dst + head(offset). dst is kAlign-aligned and holds
  // span(offset, len) bytes. Returns the bytes the OS transferred (the aligned span under direct
  // I/O, len otherwise). Thread-safe. Throws Error(IO).
  uint64_t read(uint64_t offset, std::size_t len, uint8_t* dst, const ReadWhat& what);

  // Fault injection for tests: when set, called instead of ::pread (same contract: bytes read,
  // 0 at end of file, -1 with errno set). direct says which descriptor the read targets.
  using PreadHook = std::function<ssize_t(int fd, void* buf, std::size_t n, uint64_t off, bool direct)>;
  void set_pread_hook(PreadHook hook);

 private:
  ssize_t do_pread(int fd, void* buf, std::size_t n, uint64_t off, bool direct);
  // Reads bytes [done, len) of the range [offset, offset+len) to out + done.
  uint64_t read_buffered(uint64_t offset, std::size_t len, uint8_t* out, std::size_t done, const ReadWhat& what);
  void fall_back(const std::string& why);
  [[noreturn]] void fail(const ReadWhat& what, uint64_t offset, std::size_t len, const std::string& why) const;

  std::string path_;
  uint64_t size_ = 0;
  int fd_ = -1;         // buffered
  int fd_direct_ = -1;  // O_DIRECT (Linux) / F_NOCACHE (macOS); -1 when refused or off
  DirectIo mode_;
  std::atomic<bool> direct_{false};
  mutable std::mutex note_mu_;
  std::string fallback_why_;
  PreadHook hook_;
};

}  // namespace strata::experts
