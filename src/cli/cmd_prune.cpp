// headcount prune: fine-tune a converged checkpoint with Hard-Concrete head gates.
#include <cstdio>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/prune/fisher.h"
#include "headcount/prune/prune_trainer.h"

namespace headcount::cli {

void add_prune_command(CLI::App& app) {
  struct Args {
    ConfigArgs config;
    std::string out;
    int dist_timeout = 300;
    std::string method;
  };
  auto a = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("prune",
                         "Fine-tune prune.init_from with Hard-Concrete gates on its heads "
                         "under a lambda schedule or a "
                         "target head count (or, with --method fisher, post-training Fisher "
                         "masks under a budget, in minutes); writes head_removal.csv and the "
                         "pruned checkpoint RUN/pruned");
  add_config_args(cmd, a->config);
  cmd->add_option("--method", a->method,
                  "l0 | fisher: shorthand for --set prune.method=... (fisher needs a budget: "
                  "prune.target_heads, prune.target_heads_per_type, prune.flops_fraction or "
                  "prune.latency_fraction)")
      ->check(CLI::IsMember({"l0", "fisher"}));
  cmd->add_option("--dist-timeout", a->dist_timeout,
                  "Seconds to wait for the other processes (rendezvous, each all-reduce)")
      ->check(integer_in(1, 7 * 24 * 3600))
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Run folder (the same command resumes it)")
      ->required()
      ->check(output_folder());
  cmd->callback([a] {
    Config config;
    if (!a->method.empty()) a->config.flags.push_back({"--method", "prune.method", a->method});
    if (!resolve_config(a->config, &config)) return;
    HC_CHECK(!config.prune.init_from.empty(),
             "prune.init_from is required: the converged checkpoint to prune (e.g. "
             "--set prune.init_from=runs/base/checkpoints/best)");
    train::TrainOptions o;
    o.run_dir = a->out;
    o.init_from = config.prune.init_from;
    if (config.prune.method == PruneMethod::kFisher) {
      const auto lock = train::check_run_folder(config, o.run_dir, o.rank);
      std::filesystem::create_directories(o.run_dir);
      prune::fisher_prune_command(config, o);
      return;
    }
    setup_distributed(config, o, a->dist_timeout);
    const auto lock = train::check_run_folder(config, o.run_dir, o.rank);
    std::filesystem::create_directories(o.run_dir);
    if (prune::prune_command(config, o).interrupted) exit_status() = kExitInterrupted;
  });
}

void add_export_pruned_command(CLI::App& app) {
  auto checkpoint = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto heads_of = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("export-pruned",
                                 "Write the physically pruned model of any checkpoint of a prune "
                                 "run (e.g. RUN/checkpoints/step-N), or of any checkpoint without "
                                 "the heads a prune run removed (--heads-of RUN)");
  cmd->add_option("--checkpoint", *checkpoint,
                  "Checkpoint folder of a prune run; with --heads-of, any checkpoint of the model "
                  "that run pruned (e.g. its prune.init_from)")
      ->required()
      ->check(checkpoint_folder());
  cmd->add_option("--heads-of", *heads_of,
                  "A finished prune run (L0 or Fisher): remove the heads its head_removal.csv "
                  "says it removed, e.g. to fine-tune the unpruned model under that mask "
                  "(train --init-from OUT)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--out", *out, "New checkpoint folder")->required()->check(output_folder());
  cmd->callback([checkpoint, out, heads_of] {
    const auto arch = heads_of->empty() ? prune::export_pruned(*checkpoint, *out)
                                        : prune::export_with_mask_of(*checkpoint, *heads_of, *out);
    std::printf("wrote %s: heads %s (enc/dec/enc-dec)\n", out->c_str(), arch.summary().c_str());
  });
}

}  // namespace headcount::cli
