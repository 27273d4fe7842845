#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/runtime.h"
#include "headcount/run/checkpoint_files.h"

namespace headcount::cli {

void add_config_args(CLI::App* cmd, ConfigArgs& args, bool positional) {
  if (positional) {
    // Not checked by the parser: the config loader's own error names a missing file or a folder.
    cmd->add_option("config", args.files, "YAML config file(s); later files override earlier ones");
  } else {
    cmd->add_option("--config", args.files, "YAML config file(s)");
  }
  cmd->add_option("--set", args.sets, "Override a config key: --set vocab.size=4000 (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_flag("--dump-config", args.dump, "Print the resolved config and exit");
}

bool resolve_config(const ConfigArgs& args, Config* config) {
  ConfigLoader loader;
  for (const auto& f : args.files) loader.apply_file(f);
  for (const auto& s : args.sets) loader.apply_set(s);
  for (const auto& f : args.flags) loader.apply_flag(f);
  *config = loader.finish();
  if (args.dump) {
    std::fputs(dump_config(*config).c_str(), stdout);
    return false;
  }
  return true;
}

CLI::Validator fits_config_key(const std::string& key) {
  return CLI::Validator([key](std::string& value) { return config_value_problem(key, value); },
                        fmt::format("({})", key));
}

CLI::Validator integer_in(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
          return fmt::format("expected an integer from {} to {}, got '{}'", lo, hi, value);
        return "";
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi)
          return fmt::format("expected a finite number from {} to {}, got '{}'", lo, hi, value);
        return "";
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}

CLI::Validator checkpoint_folder() {
  return CLI::Validator(
      // A missing folder: the checkpoint reader's own error names it.
      [](std::string& value) { return run::checkpoint_folder_problem(value); }, "DIR");
}

CLI::Validator output_folder() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::error_code ec;
        const std::filesystem::path p(value);
        if (std::filesystem::exists(p, ec) && !std::filesystem::is_directory(p, ec))
          return fmt::format("{} exists and is not a folder; expected a folder (new or not)",
                             value);
        return "";
      },
      "DIR");
}

CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::error_code ec;
        if (value != "-" && std::filesystem::is_directory(value, ec))
          return fmt::format("{} is a folder; expected a file name", value);
        return "";
      },
      "FILE");
}

std::filesystem::path self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  HC_CHECK(!ec, "cannot find the headcount executable (/proc/self/exe)");
  return p;
}

void setup_runtime(const Config& config) {
  runtime::apply_threads(config.threads);
}

}  // namespace headcount::cli
