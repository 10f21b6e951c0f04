#pragma once
// The CPU settings (docs/settings.md), validated by the one settings parser (config/settings.h,
// group "cpu"):
//   STRATA_ISA     auto | avx512 | avx2 | neon | scalar   (default auto: the best this CPU runs)
//   STRATA_REPACK  auto | on | off                        (default auto; cpu/repack.h)
//   STRATA_PREFETCH auto | off | BYTES (0..65536)         (default auto; cpu/prefetch.h)
// They form one group: a malformed value (or an ISA this machine cannot run) is one diagnostic
// naming the variable, and both settings then stay at their defaults (auto).
#include <cstddef>
#include <optional>

#include "strata/cpu/features.h"

namespace strata::cpu {

enum class RepackMode { Auto, On, Off };

struct CpuSettings {
  std::optional<Isa> isa;  // nullopt = auto
  RepackMode repack = RepackMode::Auto;
  std::optional<std::size_t> prefetch;  // decode GEMV prefetch distance in bytes; nullopt = auto
};

// The process's CPU settings (the kernel path and the repack default before any engine says
// otherwise): the cpu group of the process environment, read once, its diagnostics logged once.
const CpuSettings& process_cpu_settings();

const char* repack_mode_name(RepackMode m);

}  // namespace strata::cpu
