// Shared pieces of the libFuzzer targets (scripts/fuzz.sh builds and runs them).
//
// The contract every target checks: malformed input ends in a headcount::Error (the clear,
// file-and-line error the CLI prints); any other exception, a crash, a sanitizer report or a
// hang is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "headcount/common/check.h"

namespace headcount::fuzz {

namespace fs = std::filesystem;

// Splits the input at NUL bytes into at most `max_parts` parts (the last keeps the rest).
inline std::vector<std::string> split_input(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(data[i]));
    }
  }
  return parts;
}

// A scratch folder of this process, created once (the fuzzer runs one input at a time).
inline const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "headcount-fuzz-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    return fs::path(tmpl);
  }();
  return dir;
}

// Runs `f`; a headcount::Error is the expected outcome of bad input, everything else escapes
// (and libFuzzer reports it).
template <class F>
void expect_clear_error_or_success(F&& f) {
  try {
    f();
  } catch (const headcount::Error&) {
  }
}

}  // namespace headcount::fuzz
