#pragma once
// Aligned, non-zero-initialised buffers for kernels (64-byte alignment: a cache line and an
// AVX-512 register). Allocated once at setup; hot paths reuse them and never allocate.
// Large buffers (repacked weights, K/V cells, expert slots: kHugeMin and up) are aligned to 2 MiB and
// advised MADV_HUGEPAGE on Linux, so that kernels streaming them take one TLB entry per 2 MiB rather
// than per 4 KiB (where transparent huge pages are "madvise", the usual default, nothing else gets them).
// ScratchBuffer never asks for huge pages: per-row work areas are sized for the largest batch while a
// decode step touches a row or a few, and the first touch of a huge page zeroes all 2 MiB of it — and
// where memory is fragmented the kernel compacts memory first: the first draft step of a session took
// 6 ms instead of 0.3 on the demo model, faulting in its scratch that way.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace strata {

template <typename T, bool kHugeOk = true>
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlign = 64;
  static constexpr std::size_t kHugeAlign = std::size_t{2} << 20;
  static constexpr std::size_t kHugeMin = std::size_t{4} << 20;
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n) { resize(n); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        capacity_(std::exchange(o.capacity_, 0)),
        count_(std::exchange(o.count_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      capacity_ = std::exchange(o.capacity_, 0);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }

  // Grows only; contents are not preserved.
  void resize(std::size_t n) {
    if (n <= capacity_) {
      count_ = n;
      return;
    }
    std::free(data_);
    data_ = nullptr;
    const std::size_t want = n * sizeof(T);
    const std::size_t align = kHugeOk && want >= kHugeMin ? kHugeAlign : kAlign;
    // Sizes round to 64 bytes only: a last partial 2 MiB stays in 4 KiB pages rather than costing up to
    // 2 MiB of memory per buffer.
    const std::size_t bytes = want == 0 ? kAlign : (want + kAlign - 1) / kAlign * kAlign;
    // posix_memalign, not aligned_alloc: the size need not be a multiple of 2 MiB.
    void* p = nullptr;
    if (::posix_memalign(&p, align, bytes) != 0 || !p) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
#if defined(MADV_HUGEPAGE)
    if (align == kHugeAlign) (void)::madvise(data_, bytes, MADV_HUGEPAGE);  // advice only: may be refused
#endif
    capacity_ = n;
    count_ = n;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t capacity() const noexcept { return capacity_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;  // allocated elements
  std::size_t count_ = 0;     // requested size
};

// Per-row work areas (see above): small pages only.
template <typename T>
using ScratchBuffer = AlignedBuffer<T, false>;

}  // namespace strata
