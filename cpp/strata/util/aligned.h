#pragma once
// Aligned, non-zero-initialised buffers for kernels (64-byte alignment: a cache line and an
// AVX-512 register). Allocated once at setup; hot paths reuse them and never allocate.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

namespace strata {

template <typename T>
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlign = 64;
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
    std::size_t bytes = ((n * sizeof(T) + kAlign - 1) / kAlign) * kAlign;
    data_ = static_cast<T*>(std::aligned_alloc(kAlign, bytes == 0 ? kAlign : bytes));
    if (!data_) throw std::bad_alloc();
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

}  // namespace strata
