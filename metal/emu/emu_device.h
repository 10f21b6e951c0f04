#pragma once
// The emulator implementation of the encoder interface (metal/host/device.h): buffers are host
// memory, pipelines are the C++ entry points of metal/emu/kernels_emu.cpp, and dispatches run on the
// threadgroup emulator. By default each dispatch runs when it is encoded (in order, which satisfies
// every barrier). With reverse_between_barriers, the dispatches between two barriers (or a barrier and
// submit) are held and run in reverse order: on the GPU a concurrent encoder may overlap or reorder
// them, so a dispatch plan that forgot a barrier between dependent dispatches gives a different
// answer here instead of passing by luck.
#include <map>
#include <memory>
#include <string>

#include "metal/emu/emulator.h"
#include "metal/emu/kernels_emu.h"
#include "metal/host/device.h"

namespace strata::mtl {

class EmuDevice final : public Device {
 public:
  explicit EmuDevice(emu::Options opt = {}, bool reverse_between_barriers = false);
  ~EmuDevice() override;

  const char* name() const override { return "metal-emu"; }
  std::unique_ptr<Buffer> new_buffer(std::size_t bytes) override;
  std::unique_ptr<Buffer> wrap(const void* host, std::size_t bytes) override;
  const Pipeline& pipeline(const std::string& kernel, const FunctionConstants& fc = {}) override;
  Encoder& encoder() override;
  void submit() override;

  emu::Emulator& emulator() { return emu_; }
  uint64_t barriers() const;

 private:
  class EmuPipeline;
  class EmuEncoder;
  emu::Emulator emu_;
  std::map<std::string, std::unique_ptr<EmuPipeline>> pipelines_;
  std::unique_ptr<EmuEncoder> encoder_;
};

}  // namespace strata::mtl
