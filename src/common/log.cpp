#include "headcount/common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace headcount::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};
std::mutex g_mutex;
}  // namespace

void set_level(Level level) {
  g_level = level;
}
Level level() {
  return g_level;
}

bool stderr_is_tty() {
  static const bool tty = isatty(STDERR_FILENO) != 0;
  return tty;
}

std::string duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

void write(Level level, const std::string& message) {
  static const char* const kTags[] = {"debug", "info", "warning", "error"};
  std::lock_guard<std::mutex> lock(g_mutex);
  if (level == Level::kInfo) {
    std::fprintf(stderr, "[headcount] %s\n", message.c_str());
  } else {
    std::fprintf(stderr, "[headcount] %s: %s\n", kTags[static_cast<int>(level)], message.c_str());
  }
  std::fflush(stderr);
}

}  // namespace headcount::log
