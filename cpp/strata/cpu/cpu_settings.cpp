#include "strata/cpu/cpu_settings.h"

#include "strata/config/settings.h"
#include "strata/util/log.h"

namespace strata::cpu {

const char* repack_mode_name(RepackMode m) {
  switch (m) {
    case RepackMode::Auto: return "auto";
    case RepackMode::On: return "on";
    case RepackMode::Off: return "off";
  }
  return "?";
}

const CpuSettings& process_cpu_settings() {
  static const CpuSettings s = [] {
    std::vector<std::string> diagnostics;
    const CpuSettings c = config::parse_cpu_group(config::environ_map(), diagnostics);
    for (const std::string& d : diagnostics) log(LogLevel::Warn, d);
    return c;
  }();
  return s;
}

}  // namespace strata::cpu
