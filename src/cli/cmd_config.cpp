// headcount config: list the config keys, or print a resolved config.
#include <cstdio>

#include "commands.h"

namespace headcount::cli {

void add_config_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "List config keys or print a resolved config");
  cmd->require_subcommand(1);
  auto* keys = cmd->add_subcommand("keys", "Every config key with its type, default and meaning");
  keys->callback([] {
    for (const auto& k : config_keys()) {
      std::printf("%-28s %-14s default %-14s %s\n", k.key.c_str(), k.type.c_str(),
                  k.default_value.c_str(), k.help.c_str());
    }
  });
  auto args = std::make_shared<ConfigArgs>();
  auto* show = cmd->add_subcommand("show", "Print the resolved config (defaults < files < --set)");
  add_config_args(show, *args);
  show->callback([args] {
    Config config;
    ConfigArgs a = *args;
    a.dump = true;
    resolve_config(a, &config);
  });
}

}  // namespace headcount::cli
