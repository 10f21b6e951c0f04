#include "metal/host/backend.h"

#include "metal/emu/emu_device.h"
#include "strata/util/error.h"
#if defined(STRATA_HAVE_METAL_DEVICE)
#include "metal/host/metal_device.h"
#endif

namespace strata::mtl {

Backend parse_backend(const std::string& text) {
  if (text.empty() || text == "cpu") return Backend::Cpu;
  if (text == "metal-emu") return Backend::MetalEmu;
  if (text == "metal") return Backend::Metal;
  throw_error(ErrorKind::Config, "STRATA_BACKEND = \"" + text + "\": expected cpu, metal-emu or metal");
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::Cpu: return "cpu";
    case Backend::MetalEmu: return "metal-emu";
    case Backend::Metal: return "metal";
  }
  return "?";
}

std::unique_ptr<Device> create_device(Backend b, const std::string& metallib) {
  switch (b) {
    case Backend::MetalEmu: return std::make_unique<EmuDevice>();
    case Backend::Metal: {
#if defined(STRATA_HAVE_METAL_DEVICE)
      if (metallib.empty())
        throw_error(ErrorKind::Config,
                    "the metal backend needs the path of strata.metallib (Config.metallib, STRATA_METALLIB)");
      return create_metal_device(metallib);
#else
      (void)metallib;
      throw_error(ErrorKind::Config,
                  "the metal backend needs macOS built with metal-cpp; use STRATA_BACKEND=metal-emu");
#endif
    }
    case Backend::Cpu: break;
  }
  throw_error(ErrorKind::Config, "the cpu backend has no Metal device");
}

}  // namespace strata::mtl
