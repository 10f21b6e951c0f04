#pragma once
// Which backend runs a model (Config.backend, STRATA_BACKEND): "cpu" (default), "metal-emu" (the
// Metal kernels and dispatch plan on the threadgroup emulator: any platform, slowly) or "metal" (the
// GPU, macOS with metal-cpp). An unknown name is a Config error naming the choices.
#include <memory>
#include <string>

#include "metal/host/device.h"

namespace strata::mtl {

enum class Backend { Cpu, MetalEmu, Metal };

Backend parse_backend(const std::string& text);
const char* backend_name(Backend b);
// A device for a Metal backend: EmuDevice for MetalEmu; the metal-cpp device (metallib: the path of
// strata.metallib, Config.metallib / STRATA_METALLIB) for Metal where it is built, else a Config error.
std::unique_ptr<Device> create_device(Backend b, const std::string& metallib = "");

}  // namespace strata::mtl
