// Shared helpers for the test suite.
#pragma once

#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/common/io.h"

namespace headcount::testing {

namespace fs = std::filesystem;

inline fs::path source_dir() {
  return fs::path(HEADCOUNT_SOURCE_DIR);
}
// The repository's configs/FILE... layered as the command line layers them, then --set SETS.
inline ConfigLoader repo_configs(const std::vector<std::string>& files,
                                 const std::vector<std::string>& sets = {}) {
  ConfigLoader l;
  for (const auto& f : files) l.apply_file(source_dir() / "configs" / f);
  for (const auto& s : sets) l.apply_set(s);
  return l;
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

#ifdef HEADCOUNT_BINARY
// The headcount binary run with `args` (after `env`, e.g. "env -u X" or "A=1"): its exit status
// (128 + signal when killed) and its stdout and stderr apart.
struct CommandResult {
  int code = -1;
  std::string out, err;
};
inline CommandResult run_headcount(const std::string& env, const std::string& args) {
  TempDir dir;
  const std::string cmd =
      fmt::format("{} {} {} 2>{}", env, HEADCOUNT_BINARY, args, (dir / "err").string());
  FILE* p = popen(cmd.c_str(), "r");
  CommandResult r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = io::read_file(dir / "err");
  return r;
}
#endif  // HEADCOUNT_BINARY: the test binary's, not the fuzz targets'

}  // namespace headcount::testing
