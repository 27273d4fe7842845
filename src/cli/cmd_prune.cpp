// headcount prune: fine-tune a converged checkpoint with Hard-Concrete head gates.
#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/prune/prune_trainer.h"

namespace headcount::cli {

void add_prune_command(CLI::App& app) {
  struct Args {
    ConfigArgs config;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("prune",
                                 "Fine-tune prune.init_from with Hard-Concrete gates on its heads "
                                 "under a lambda schedule or a "
                                 "target head count; writes gates.jsonl, head_removal.csv and the "
                                 "pruned checkpoint RUN/pruned");
  add_config_args(cmd, a->config);
  cmd->add_option("--out", a->out, "Run folder (the same command resumes it)")->required();
  cmd->callback([a] {
    Config config;
    if (!resolve_config(a->config, &config)) return;
    HC_CHECK(!config.prune.init_from.empty(),
             "prune.init_from is required: the converged checkpoint to prune (e.g. "
             "--set prune.init_from=runs/base/checkpoints/best)");
    train::TrainOptions o;
    o.run_dir = a->out;
    o.init_from = config.prune.init_from;
    std::error_code ec;
    if (!std::filesystem::exists(o.run_dir / "checkpoints" / "last", ec) &&
        std::filesystem::exists(o.run_dir, ec) && !std::filesystem::is_empty(o.run_dir, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(o.run_dir)) {
        const auto name = e.path().filename().string();
        HC_CHECK(name == "config.yaml" || name == "metrics.jsonl" || name == "gates.jsonl" ||
                     name == "checkpoints",
                 "{} exists and holds '{}', but no checkpoint to resume: refusing to overwrite it",
                 a->out, name);
      }
    }
    std::filesystem::create_directories(o.run_dir);
    prune::PruneTrainer trainer(config, o);
    trainer.run();
  });
}

}  // namespace headcount::cli
