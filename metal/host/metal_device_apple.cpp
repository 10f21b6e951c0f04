// The metal-cpp implementation of the encoder interface (device.h). Compiled only on Apple platforms
// (metal/targets.cmake, STRATA_METAL_CPP_DIR); it cannot be compiled or run on Linux, which is why it
// stays this thin: everything it does is one metal-cpp call per interface call. The dispatch plan, the
// kernels and the emulator that checks them are shared with every platform.
//
// - Buffers: MTLStorageModeShared (unified memory: the host reads/writes contents() between submits);
//   wrap() maps page-aligned host memory without a copy (newBufferWithBytesNoCopy), else copies.
// - Pipelines: functions of strata.metallib (built by metal/targets.cmake with fast math and FP
//   contraction off) specialised with MTLFunctionConstantValues, cached by name + constants.
// - Encoder: one concurrent compute encoder per command buffer; barrier() is
//   memoryBarrierWithScope(MTLBarrierScopeBuffers); submit() ends, commits and waits.
#if defined(__APPLE__)

#define NS_PRIVATE_IMPLEMENTATION
#define MTL_PRIVATE_IMPLEMENTATION
#include <Foundation/Foundation.hpp>
#include <Metal/Metal.hpp>

#include <map>
#include <memory>
#include <string>
#include <unistd.h>

#include "metal/host/metal_device.h"
#include "strata/util/error.h"

namespace strata::mtl {
namespace {

NS::String* ns(const std::string& s) { return NS::String::string(s.c_str(), NS::UTF8StringEncoding); }

std::string describe(NS::Error* e) {
  return e ? std::string(e->localizedDescription()->utf8String()) : std::string("unknown error");
}

class MetalBuffer final : public Buffer {
 public:
  explicit MetalBuffer(MTL::Buffer* b) : b_(b) {}
  ~MetalBuffer() override { b_->release(); }
  void* contents() override { return b_->contents(); }
  std::size_t length() const override { return b_->length(); }
  MTL::Buffer* get() const { return b_; }

 private:
  MTL::Buffer* b_;
};

class MetalPipeline final : public Pipeline {
 public:
  MetalPipeline(std::string name, MTL::ComputePipelineState* p) : name_(std::move(name)), p_(p) {}
  ~MetalPipeline() override { p_->release(); }
  const std::string& name() const override { return name_; }
  uint32_t max_threads_per_group() const override { return static_cast<uint32_t>(p_->maxTotalThreadsPerThreadgroup()); }
  MTL::ComputePipelineState* get() const { return p_; }

 private:
  std::string name_;
  MTL::ComputePipelineState* p_;
};

class MetalEncoder final : public Encoder {
 public:
  void begin(MTL::CommandQueue* q) {
    cb_ = q->commandBuffer();
    enc_ = cb_->computeCommandEncoder(MTL::DispatchTypeConcurrent);
  }
  bool open() const { return enc_ != nullptr; }
  void set_pipeline(const Pipeline& p) override {
    enc_->setComputePipelineState(static_cast<const MetalPipeline&>(p).get());
  }
  void set_buffer(uint32_t index, BufferRef b) override {
    enc_->setBuffer(static_cast<MetalBuffer*>(b.buffer)->get(), b.offset, index);
  }
  void set_bytes(uint32_t index, const void* data, std::size_t n) override { enc_->setBytes(data, n, index); }
  void set_threadgroup_memory(uint32_t index, uint32_t bytes) override {
    enc_->setThreadgroupMemoryLength((bytes + 15u) / 16u * 16u, index);
  }
  void dispatch(Dim3 g, Dim3 t) override {
    ++dispatches_;
    enc_->dispatchThreadgroups(MTL::Size(g.x, g.y, g.z), MTL::Size(t.x, t.y, t.z));
  }
  void barrier() override { enc_->memoryBarrier(MTL::BarrierScopeBuffers); }
  void end_and_wait() {
    enc_->endEncoding();
    cb_->commit();
    cb_->waitUntilCompleted();
    const MTL::CommandBufferStatus st = cb_->status();
    NS::Error* err = cb_->error();
    enc_ = nullptr;
    cb_ = nullptr;
    if (st == MTL::CommandBufferStatusError)
      throw_error(ErrorKind::Internal, "Metal command buffer failed: " + describe(err));
  }

 private:
  MTL::CommandBuffer* cb_ = nullptr;
  MTL::ComputeCommandEncoder* enc_ = nullptr;
};

class MetalDevice final : public Device {
 public:
  explicit MetalDevice(const std::string& metallib) {
    dev_ = MTL::CreateSystemDefaultDevice();
    if (!dev_) throw_error(ErrorKind::IO, "no Metal device");
    NS::Error* err = nullptr;
    lib_ = dev_->newLibrary(ns(metallib), &err);
    if (!lib_) throw_error(ErrorKind::IO, metallib + ": cannot load the Metal library: " + describe(err));
    queue_ = dev_->newCommandQueue();
  }
  ~MetalDevice() override {
    pipelines_.clear();
    queue_->release();
    lib_->release();
    dev_->release();
  }
  const char* name() const override { return "metal"; }

  std::unique_ptr<Buffer> new_buffer(std::size_t bytes) override {
    MTL::Buffer* b = dev_->newBuffer(bytes == 0 ? 16 : bytes, MTL::ResourceStorageModeShared);
    if (!b) throw_error(ErrorKind::IO, "Metal: cannot allocate a buffer of " + std::to_string(bytes) + " bytes");
    return std::make_unique<MetalBuffer>(b);
  }

  std::unique_ptr<Buffer> wrap(const void* host, std::size_t bytes) override {
    const auto page = static_cast<uintptr_t>(getpagesize());
    MTL::Buffer* b = nullptr;
    if (reinterpret_cast<uintptr_t>(host) % page == 0 && bytes % page == 0)
      b = dev_->newBuffer(const_cast<void*>(host), bytes, MTL::ResourceStorageModeShared, nullptr);
    if (!b) b = dev_->newBuffer(host, bytes, MTL::ResourceStorageModeShared);  // a copy
    if (!b) throw_error(ErrorKind::IO, "Metal: cannot map " + std::to_string(bytes) + " bytes");
    return std::make_unique<MetalBuffer>(b);
  }

  const Pipeline& pipeline(const std::string& kernel, const FunctionConstants& fc) override {
    const std::string key = kernel + fc.key();
    if (auto it = pipelines_.find(key); it != pipelines_.end()) return *it->second;
    MTL::FunctionConstantValues* values = MTL::FunctionConstantValues::alloc()->init();
    for (int i = 0; i < fc.count; ++i) {
      const auto& v = fc.values[i];
      if (v.is_bool) {
        const bool b = v.value != 0;
        values->setConstantValue(&b, MTL::DataTypeBool, v.index);
      } else {
        values->setConstantValue(&v.value, MTL::DataTypeUInt, v.index);
      }
    }
    NS::Error* err = nullptr;
    MTL::Function* fn = lib_->newFunction(ns(kernel), values, &err);
    values->release();
    if (!fn) throw_error(ErrorKind::Internal, "Metal: no function " + kernel + ": " + describe(err));
    MTL::ComputePipelineState* pso = dev_->newComputePipelineState(fn, &err);
    fn->release();
    if (!pso) throw_error(ErrorKind::Internal, "Metal: pipeline " + kernel + ": " + describe(err));
    auto p = std::make_unique<MetalPipeline>(kernel, pso);
    const Pipeline& ref = *p;
    pipelines_.emplace(key, std::move(p));
    return ref;
  }

  Encoder& encoder() override {
    if (!enc_.open()) enc_.begin(queue_);
    return enc_;
  }

  void submit() override {
    if (enc_.open()) enc_.end_and_wait();
  }

 private:
  MTL::Device* dev_ = nullptr;
  MTL::Library* lib_ = nullptr;
  MTL::CommandQueue* queue_ = nullptr;
  std::map<std::string, std::unique_ptr<MetalPipeline>> pipelines_;
  MetalEncoder enc_;
};

}  // namespace

std::unique_ptr<Device> create_metal_device(const std::string& metallib) {
  return std::make_unique<MetalDevice>(metallib);
}

}  // namespace strata::mtl

#endif  // __APPLE__
