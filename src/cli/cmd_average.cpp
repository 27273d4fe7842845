// headcount average-checkpoints: the mean of several checkpoints' weights, as a new checkpoint.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/run/average.h"

namespace headcount::cli {

void add_average_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> checkpoints;
    std::string run, out;
    int last = 0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "average-checkpoints",
      "Write a checkpoint whose weights are the mean of several checkpoints of one model (the "
      "same architecture and vocabulary), e.g. the last step-N checkpoints of a fine-tuning run: "
      "often a little better than the last alone. The newest input gives the training state, "
      "config and vocabulary; no optimizer state is written");
  cmd->add_option("checkpoints", a->checkpoints, "Checkpoint folders")->check(checkpoint_folder());
  auto* run_option = cmd->add_option("--run", a->run,
                                     "A run folder: average its newest step-N checkpoints (--last)")
                         ->check(CLI::ExistingDirectory);
  cmd->add_option("--last", a->last, "How many of --run's newest step-N checkpoints")
      ->check(integer_in(1, 1000000))
      ->needs(run_option);
  run_option->needs("--last");
  cmd->add_option("--out", a->out, "New checkpoint folder")->required()->check(output_folder());
  cmd->callback([a] {
    HC_CHECK(a->checkpoints.empty() != a->run.empty(),
             "average-checkpoints takes either checkpoint folders or --run RUN --last K (got {})",
             a->checkpoints.empty() ? "neither" : "both");
    std::vector<std::filesystem::path> dirs(a->checkpoints.begin(), a->checkpoints.end());
    if (!a->run.empty()) dirs = run::last_step_checkpoints(a->run, a->last);
    const auto r = run::average_checkpoints(dirs, a->out);
    std::printf("wrote %s: the mean of %zu checkpoints (steps %s), heads %s (enc/dec/enc-dec)\n",
                a->out.c_str(), dirs.size(), fmt::format("{}", fmt::join(r.steps, ", ")).c_str(),
                r.architecture.summary().c_str());
  });
}

}  // namespace headcount::cli
