// Errors: one exception type and one check macro. Library code throws; the CLI turns the
// exception into one line on stderr and a non-zero exit.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace headcount {

// An error the user can act on: bad input, a missing file, an invalid config value. `what()` is
// the message shown to the user; `where()` is the source location that raised it (shown with
// HEADCOUNT_DEBUG=1).
class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file = "", int line = 0)
      : std::runtime_error(std::move(message)), file_(file), line_(line) {}
  std::string where() const { return fmt::format("{}:{}", file_, line_); }

 private:
  const char* file_;
  int line_;
};

}  // namespace headcount

// HC_CHECK(cond, "format {}", args...): throws headcount::Error with the formatted message.
#define HC_CHECK(cond, ...)                                                     \
  do {                                                                          \
    if (!(cond)) {                                                              \
      throw ::headcount::Error(::fmt::format(__VA_ARGS__), __FILE__, __LINE__); \
    }                                                                           \
  } while (0)

#define HC_FAIL(...) throw ::headcount::Error(::fmt::format(__VA_ARGS__), __FILE__, __LINE__)
