// Shared helpers for the test suite.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "headcount/common/check.h"

namespace headcount::testing {

namespace fs = std::filesystem;

inline fs::path source_dir() {
  return fs::path(HEADCOUNT_SOURCE_DIR);
}
inline fs::path test_data(const std::string& name) {
  return source_dir() / "tests" / "data" / name;
}

// ../shared beside the project (HEADCOUNT_SHARED overrides).
inline fs::path shared_dir() {
  if (const char* env = std::getenv("HEADCOUNT_SHARED")) return fs::path(env);
  return source_dir().parent_path() / "shared";
}

// The message of the headcount::Error that `f` throws ("(no error)" when it throws none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline bool running_in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) != "" && std::string(ci) != "false";
}

// A fresh, empty temporary folder, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "headcount-test-XXXXXX").string();
    path_ = fs::path(mkdtemp(tmpl.data()));
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

}  // namespace headcount::testing
