#include <cstdio>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/runtime.h"

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
  *config = loader.finish();
  if (args.dump) {
    std::fputs(dump_config(*config).c_str(), stdout);
    return false;
  }
  return true;
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
