// One small logging header. Everything goes to stderr; stdout is reserved for a command's result.
#pragma once

#include <string>

#include <fmt/format.h>

namespace headcount::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_level(Level level);
Level level();
void write(Level level, const std::string& message);
// True when stderr is a terminal (progress lines redraw in place there, and are plain lines
// otherwise).
bool stderr_is_tty();
// A readable duration: "42s", "3m07s", "2h05m".
std::string duration(double seconds);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace headcount::log
