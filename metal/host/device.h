#pragma once
// The encoder interface the Metal backend's host code is written against (SPEC §3, R-7). The dispatch
// plan (dispatch.h) sets pipelines, function constants, buffers and offsets, threadgroup memory,
// grids and barriers through it; two implementations run the plan:
//   - EmuDevice (metal/emu/emu_device.h): the threadgroup emulator, on every platform;
//   - MetalDevice (metal/host/metal_device_apple.cpp): metal-cpp, compiled only on Apple platforms.
// Buffers are host-visible (Apple silicon's unified memory: MTLStorageModeShared), so the host reads
// and writes contents() directly between submits.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace strata::mtl {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* contents() = 0;
  virtual std::size_t length() const = 0;
};

// A buffer binding: the buffer and a byte offset into it.
struct BufferRef {
  Buffer* buffer = nullptr;
  std::size_t offset = 0;
  BufferRef at(std::size_t bytes) const { return BufferRef{buffer, offset + bytes}; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(buffer->contents()) + offset);
  }
};

// Function constants of a pipeline ([[function_constant(i)]]): bool or uint values by index.
struct FunctionConstants {
  static constexpr int kMax = 8;
  struct Value {
    uint16_t index;
    bool is_bool;
    uint32_t value;
  };
  Value values[kMax] = {};
  int count = 0;
  FunctionConstants& set_bool(uint16_t index, bool v);
  FunctionConstants& set_uint(uint16_t index, uint32_t v);
  std::string key() const;  // for pipeline caches
};

class Pipeline {
 public:
  virtual ~Pipeline() = default;
  virtual const std::string& name() const = 0;
  virtual uint32_t max_threads_per_group() const = 0;
};

class Encoder {
 public:
  virtual ~Encoder() = default;
  virtual void set_pipeline(const Pipeline& p) = 0;
  virtual void set_buffer(uint32_t index, BufferRef b) = 0;
  virtual void set_bytes(uint32_t index, const void* data, std::size_t n) = 0;
  virtual void set_threadgroup_memory(uint32_t index, uint32_t bytes) = 0;
  virtual void dispatch(Dim3 threadgroups, Dim3 threads_per_group) = 0;
  // Every later dispatch sees the buffer writes of every earlier one (MTLBarrierScopeBuffers).
  virtual void barrier() = 0;
  // Counts (the emulator's and Metal's encoders count the same calls).
  uint64_t dispatches() const { return dispatches_; }

 protected:
  uint64_t dispatches_ = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const char* name() const = 0;
  virtual std::unique_ptr<Buffer> new_buffer(std::size_t bytes) = 0;
  // A read-only view of host memory (mapped weights): no copy where the platform allows it.
  virtual std::unique_ptr<Buffer> wrap(const void* host, std::size_t bytes) = 0;
  // The pipeline of a kernel specialised with function constants (cached).
  virtual const Pipeline& pipeline(const std::string& kernel, const FunctionConstants& fc = {}) = 0;
  // The encoder of the open command buffer (opened on first use).
  virtual Encoder& encoder() = 0;
  // Ends encoding, commits the command buffer and waits for it.
  virtual void submit() = 0;
};

template <class T>
void set_args(Encoder& e, uint32_t index, const T& args) {
  e.set_bytes(index, &args, sizeof(T));
}

}  // namespace strata::mtl
