#pragma once
// A small diagnostic channel: one line per message on stderr, filtered by level.
// Level comes from the validated config (never read per token); default Warn.
#include <string>

namespace strata {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log(LogLevel level, const std::string& message);

}  // namespace strata
