// headcount train: train a Transformer, or resume a run.
#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/run_folder.h"
#include "headcount/train/trainer.h"

namespace headcount::cli {

void add_train_command(CLI::App& app) {
  struct Args {
    ConfigArgs config;
    std::string out;
    int dist_timeout = 300;
    std::string architecture_from;
    std::string init_from;
    bool resume = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "train",
      "Train a Transformer (RUN/checkpoints/{last,best,step-N}, RUN/metrics.jsonl); the same "
      "command on an existing RUN resumes it");
  add_config_args(cmd, a->config);
  cmd->add_option("--dist-timeout", a->dist_timeout,
                  "Seconds to wait for the other processes (rendezvous, each all-reduce)")
      ->check(integer_in(1, 7 * 24 * 3600))
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Run folder")->required()->check(output_folder());
  cmd->add_option("--architecture-from", a->architecture_from,
                  "Train this architecture from scratch: a checkpoint (e.g. a pruned one), a "
                  "run's records folder holding architecture.json, or the file itself")
      ->check(CLI::ExistingPath);
  cmd->add_option("--init-from", a->init_from,
                  "Fine-tune: start from this checkpoint's weights, architecture and vocabulary "
                  "(e.g. a pruned one)")
      ->check(checkpoint_folder())
      ->excludes("--architecture-from");
  cmd->add_flag("--resume", a->resume, "Require an existing run to resume");
  cmd->callback([a] {
    Config config;
    if (!resolve_config(a->config, &config)) return;
    train::TrainOptions o;
    o.run_dir = a->out;
    if (!a->architecture_from.empty()) {
      // Checked before the corpus and the vocabulary are prepared (minutes), not after.
      (void)run::read_architecture(a->architecture_from);
      o.architecture_from = a->architecture_from;
    }
    if (!a->init_from.empty()) o.init_from = a->init_from;
    std::error_code ec;
    HC_CHECK(!a->resume || std::filesystem::exists(run::RunFolder{o.run_dir}.last(), ec),
             "--resume: {} has no checkpoint to resume from", a->out);
    setup_distributed(config, o, a->dist_timeout);
    if (train::train_command(config, o).interrupted) exit_status() = kExitInterrupted;
  });
}

}  // namespace headcount::cli
