#pragma once
// The metal-cpp device (metal_device_apple.cpp), Apple platforms only: the same encoder interface
// as the emulator's, backed by a real MTLDevice and strata.metallib.
#include <memory>
#include <string>

#include "metal/host/device.h"

namespace strata::mtl {

#if defined(__APPLE__)
// metallib: path of strata.metallib (built next to the library by metal/targets.cmake).
std::unique_ptr<Device> create_metal_device(const std::string& metallib);
#endif

}  // namespace strata::mtl
