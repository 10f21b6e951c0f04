#pragma once
// The CPU settings, read once per process from the environment (docs/settings.md):
//   STRATA_ISA     auto | avx512 | avx2 | neon | scalar   (default auto: the best this CPU runs)
//   STRATA_REPACK  auto | on | off                        (default auto; cpu/repack.h)
// The two form one group: a malformed value (or an ISA this machine cannot run) is one diagnostic
// naming the variable, and both settings then stay at their defaults (auto).
#include <optional>
#include <string>
#include <vector>

#include "strata/config/settings.h"
#include "strata/cpu/features.h"

namespace strata::cpu {

enum class RepackMode { Auto, On, Off };

struct CpuSettings {
  std::optional<Isa> isa;  // nullopt = auto
  RepackMode repack = RepackMode::Auto;
};

struct CpuSettingsResult {
  CpuSettings settings;
  std::vector<std::string> diagnostics;
};

// Pure: validates env (absent key = unset).
CpuSettingsResult parse_cpu_settings(const config::EnvMap& env);
// The process's settings: parse_cpu_settings(config::environ_map()) once, diagnostics logged once.
const CpuSettings& process_cpu_settings();

const char* repack_mode_name(RepackMode m);

}  // namespace strata::cpu
