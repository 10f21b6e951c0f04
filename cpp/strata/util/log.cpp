#include "strata/util/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace strata {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Warn)};
std::mutex g_mutex;
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warning";
    case LogLevel::Error: return "error";
    default: return "";
  }
}
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load() || level == LogLevel::Off) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "strata %s: %s\n", level_name(level), message.c_str());
}

}  // namespace strata
