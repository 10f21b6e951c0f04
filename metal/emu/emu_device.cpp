#include "metal/emu/emu_device.h"

#include <cstring>
#include <vector>

#include "strata/util/aligned.h"
#include "strata/util/error.h"

namespace strata::mtl {
namespace {

class HostBuffer final : public Buffer {
 public:
  // Fresh contents are a NaN pattern, so a plan that reads what it never wrote shows it.
  explicit HostBuffer(std::size_t bytes) : data_(bytes == 0 ? 16 : bytes), len_(bytes) {
    std::memset(data_.data(), 0xFF, bytes == 0 ? 16 : bytes);
  }
  void* contents() override { return data_.data(); }
  std::size_t length() const override { return len_; }

 private:
  AlignedBuffer<uint8_t> data_;
  std::size_t len_;
};

class WrappedBuffer final : public Buffer {
 public:
  WrappedBuffer(const void* p, std::size_t bytes) : p_(const_cast<void*>(p)), len_(bytes) {}
  void* contents() override { return p_; }
  std::size_t length() const override { return len_; }

 private:
  void* p_;
  std::size_t len_;
};

}  // namespace

class EmuDevice::EmuPipeline final : public Pipeline {
 public:
  EmuPipeline(std::string name, emu::KernelFn entry, const FunctionConstants& fc) : name_(std::move(name)), fn_(entry) {
    for (int i = 0; i < fc.count; ++i) {
      const auto& v = fc.values[i];
      if (v.index >= emu::kMaxFunctionConstants)
        throw_error(ErrorKind::Internal, "function constant index " + std::to_string(v.index) + " is out of range");
      fc_[v.index] = v.value;
      fc_set_[v.index] = true;
    }
  }
  const std::string& name() const override { return name_; }
  uint32_t max_threads_per_group() const override { return emu::kMaxThreadsPerGroup; }
  emu::KernelFn fn() const { return fn_; }
  const uint32_t* fc() const { return fc_; }
  const bool* fc_set() const { return fc_set_; }

 private:
  std::string name_;
  emu::KernelFn fn_;
  uint32_t fc_[emu::kMaxFunctionConstants] = {};
  bool fc_set_[emu::kMaxFunctionConstants] = {};
};

class EmuDevice::EmuEncoder final : public Encoder {
 public:
  EmuEncoder(emu::Emulator& e, bool reverse) : emu_(e), reverse_(reverse) {}

  void set_pipeline(const Pipeline& p) override { pipe_ = static_cast<const EmuPipeline*>(&p); }

  void set_buffer(uint32_t index, BufferRef b) override {
    check_index(index);
    if (b.buffer == nullptr) throw_error(ErrorKind::Internal, "set_buffer(" + std::to_string(index) + "): no buffer");
    if (b.offset > b.buffer->length())
      throw_error(ErrorKind::Internal, "set_buffer(" + std::to_string(index) + "): offset " + std::to_string(b.offset) +
                                           " past the end of a buffer of " + std::to_string(b.buffer->length()) +
                                           " bytes");
    bind_.buf[index] = static_cast<uint8_t*>(b.buffer->contents()) + b.offset;
    bind_.len[index] = b.buffer->length() - b.offset;
  }

  void set_bytes(uint32_t index, const void* data, std::size_t n) override {
    check_index(index);
    if (n > 4096) throw_error(ErrorKind::Internal, "set_bytes: more than 4 KiB (Metal's limit)");
    auto& v = bind_.bytes[index];
    v.resize(n + 16);
    std::memcpy(v.data(), data, n);
    bind_.buf[index] = v.data();
    bind_.len[index] = n;
  }

  void set_threadgroup_memory(uint32_t index, uint32_t bytes) override {
    if (index >= static_cast<uint32_t>(emu::kMaxThreadgroupArgs))
      throw_error(ErrorKind::Internal, "set_threadgroup_memory: index " + std::to_string(index));
    tg_[index] = bytes;
  }

  void dispatch(Dim3 groups, Dim3 threads) override {
    if (pipe_ == nullptr) throw_error(ErrorKind::Internal, "dispatch without a pipeline");
    std::memcpy(bind_.fc, pipe_->fc(), sizeof(bind_.fc));
    std::memcpy(bind_.fc_set, pipe_->fc_set(), sizeof(bind_.fc_set));
    ++dispatches_;
    Pending d{pipe_, {}, groups, threads, {}};
    for (int i = 0; i < emu::kMaxThreadgroupArgs; ++i) d.tg[i] = tg_[i];
    // Threadgroup lengths do not carry over to the next pipeline's dispatch unless set again.
    for (auto& t : tg_) t = 0;
    if (!reverse_) {
      run(d, bind_);
      return;
    }
    d.bind = std::make_unique<emu::EmuBinding>();
    copy_binding(bind_, *d.bind);
    pending_.push_back(std::move(d));
  }

  void barrier() override {
    ++barriers_;
    flush();
  }
  void flush() {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) run(*it, *it->bind);
    pending_.clear();
  }
  uint64_t barriers() const { return barriers_; }

 private:
  static void check_index(uint32_t index) {
    if (index >= static_cast<uint32_t>(emu::kMaxBufferArgs))
      throw_error(ErrorKind::Internal, "buffer index " + std::to_string(index) + " is out of range");
  }
  struct Pending {
    const EmuPipeline* pipe;
    std::unique_ptr<emu::EmuBinding> bind;
    Dim3 groups, threads;
    uint32_t tg[emu::kMaxThreadgroupArgs];
  };

  void run(const Pending& d, const emu::EmuBinding& b) {
    emu::Launch l;
    l.fn = d.pipe->fn();
    l.ctx = &b;
    l.grid = emu::Dim3{d.groups.x, d.groups.y, d.groups.z};
    l.group = emu::Dim3{d.threads.x, d.threads.y, d.threads.z};
    for (int i = 0; i < emu::kMaxThreadgroupArgs; ++i) l.tg_bytes[i] = d.tg[i];
    l.name = d.pipe->name().c_str();
    emu_.dispatch(l);
  }

  // A deep copy: set_bytes data moves with the binding (pointers into `bytes` are re-aimed).
  static void copy_binding(const emu::EmuBinding& from, emu::EmuBinding& to) {
    for (int i = 0; i < emu::kMaxBufferArgs; ++i) {
      to.bytes[i] = from.bytes[i];
      const bool inline_bytes = !from.bytes[i].empty() && from.buf[i] == from.bytes[i].data();
      to.buf[i] = inline_bytes ? to.bytes[i].data() : from.buf[i];
      to.len[i] = from.len[i];
    }
    std::memcpy(to.fc, from.fc, sizeof(to.fc));
    std::memcpy(to.fc_set, from.fc_set, sizeof(to.fc_set));
  }

  emu::Emulator& emu_;
  bool reverse_;
  std::vector<Pending> pending_;
  const EmuPipeline* pipe_ = nullptr;
  emu::EmuBinding bind_;
  uint32_t tg_[emu::kMaxThreadgroupArgs] = {};
  uint64_t barriers_ = 0;
};

EmuDevice::EmuDevice(emu::Options opt, bool reverse_between_barriers)
    : emu_(opt), encoder_(std::make_unique<EmuEncoder>(emu_, reverse_between_barriers)) {}
EmuDevice::~EmuDevice() = default;

std::unique_ptr<Buffer> EmuDevice::new_buffer(std::size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

std::unique_ptr<Buffer> EmuDevice::wrap(const void* host, std::size_t bytes) {
  return std::make_unique<WrappedBuffer>(host, bytes);
}

const Pipeline& EmuDevice::pipeline(const std::string& kernel, const FunctionConstants& fc) {
  const std::string key = kernel + fc.key();
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return *it->second;
  emu::KernelFn fn = emu::find_kernel(kernel.c_str());
  if (fn == nullptr) throw_error(ErrorKind::Internal, "metal-emu: no kernel named " + kernel);
  auto p = std::make_unique<EmuPipeline>(kernel, fn, fc);
  const Pipeline& ref = *p;
  pipelines_.emplace(key, std::move(p));
  return ref;
}

Encoder& EmuDevice::encoder() { return *encoder_; }

void EmuDevice::submit() { encoder_->flush(); }

uint64_t EmuDevice::barriers() const { return encoder_->barriers(); }

}  // namespace strata::mtl
