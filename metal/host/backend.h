#pragma once
// STRATA_BACKEND: which backend runs a model. "cpu" (default), "metal-emu" (the Metal kernels and
// dispatch plan on the threadgroup emulator: any platform, slowly) or "metal" (the GPU, macOS with
// metal-cpp). Read once when an engine is created; an unknown value is a Config error naming the
// choices.
#include <memory>
#include <string>

#include "metal/host/device.h"

namespace strata::mtl {

enum class Backend { Cpu, MetalEmu, Metal };

Backend parse_backend(const std::string& text);
const char* backend_name(Backend b);
// STRATA_BACKEND (unset or empty: Cpu).
Backend backend_from_env();

// A device for a Metal backend: EmuDevice for MetalEmu; the metal-cpp device (metallib: the path of
// strata.metallib, or STRATA_METALLIB when empty) for Metal where it is built, else a Config error.
std::unique_ptr<Device> create_device(Backend b, const std::string& metallib = "");

}  // namespace strata::mtl
