#include "strata/cpu/cpu_settings.h"

#include <cctype>

#include "strata/util/log.h"

namespace strata::cpu {
namespace {

std::string lower(std::string_view s) {
  std::string l(config::trim(s));
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l;
}

std::string quoted(std::string_view text) {
  std::string q;
  q += '\'';
  q.append(text.data(), std::min<std::size_t>(text.size(), 32));
  if (text.size() > 32) q += "...";
  q += '\'';
  return q;
}

}  // namespace

const char* repack_mode_name(RepackMode m) {
  switch (m) {
    case RepackMode::Auto: return "auto";
    case RepackMode::On: return "on";
    case RepackMode::Off: return "off";
  }
  return "?";
}

CpuSettingsResult parse_cpu_settings(const config::EnvMap& env) {
  CpuSettingsResult r;
  if (const auto it = env.find("STRATA_ISA"); it != env.end()) {
    const std::string v = lower(it->second);
    bool known = v == "auto";
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
      if (v != isa_name(isa)) continue;
      known = true;
      if (isa_supported(isa)) {
        r.settings.isa = isa;
      } else {
        std::string msg = "STRATA_ISA: ";
        msg += isa_name(isa);
        msg += " is not available on this build and CPU (available:";
        for (Isa s : compiled_isas())
          if (isa_supported(s)) (msg += ' ') += isa_name(s);
        msg += "); using ";
        msg += isa_name(best_isa());
        r.diagnostics.push_back(std::move(msg));
      }
    }
    if (!known)
      r.diagnostics.push_back("STRATA_ISA: " + quoted(it->second) + " is not auto, avx512, avx2, neon or scalar");
  }
  if (const auto it = env.find("STRATA_REPACK"); it != env.end()) {
    const std::string v = lower(it->second);
    if (v == "auto") {
      r.settings.repack = RepackMode::Auto;
    } else if (const config::Parsed<bool> b = config::parse_bool(v); b.value) {
      r.settings.repack = *b.value ? RepackMode::On : RepackMode::Off;
    } else {
      r.diagnostics.push_back("STRATA_REPACK: " + quoted(it->second) + " is not auto, on or off");
    }
  }
  if (!r.diagnostics.empty()) r.settings = CpuSettings{};  // a group is never half-applied
  return r;
}

const CpuSettings& process_cpu_settings() {
  static const CpuSettings s = [] {
    CpuSettingsResult r = parse_cpu_settings(config::environ_map());
    for (const std::string& d : r.diagnostics) log(LogLevel::Warn, d);
    return r.settings;
  }();
  return s;
}

}  // namespace strata::cpu
