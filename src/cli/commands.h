// The headcount subcommands: one source file each, registered in the table in main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/train/trainer.h"

namespace headcount::cli {

// The arguments after a bare "--" (the command `headcount launch` runs); main() removes them
// before the command line is parsed.
std::vector<std::string>& args_after_dash_dash();
// The exit status of the command that ran (0 unless it sets another, e.g. 3 when a run was
// interrupted and saved: kExitInterrupted). Errors exit 1.
int& exit_status();

struct CommandSpec {
  const char* name;
  void (*add)(CLI::App& parent);
};

void add_bleu_command(CLI::App& app);
void add_config_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_vocab_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_translate_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_prune_command(CLI::App& app);
void add_export_pruned_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_average_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_reproduce_command(CLI::App& app);
void add_table_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_analyze_command(CLI::App& app);

// Config files, --set overrides and --dump-config, shared by every command that takes a config.
struct ConfigArgs {
  std::vector<std::string> files;
  std::vector<std::string> sets;
  // A command's flags that stand for config keys (e.g. prune --method), applied after --set;
  // errors about their keys name the flag.
  std::vector<FlagOverride> flags;
  bool dump = false;
};
void add_config_args(CLI::App* cmd, ConfigArgs& args, bool positional = true);
// Resolves the config; with --dump-config prints it to stdout and returns false (nothing runs).
bool resolve_config(const ConfigArgs& args, Config* config);
// Checks of command-line values, run by CLI11 before any work; its message names the flag. A
// flag that stands for a config key takes the key's type and range from the schema table
// (config_value_problem); other numeric flags state their range here. All refuse NaN and
// infinities, which CLI11's own Range and PositiveNumber let through.
CLI::Validator fits_config_key(const std::string& key);
CLI::Validator integer_in(long long lo, long long hi);
CLI::Validator number_in(double lo, double hi);
// --checkpoint: the folder; a file inside one (model.pt) is named as such, with its folder.
CLI::Validator checkpoint_folder();
// An output file ("-": stdout) that is not a folder: checked before hours of decoding.
CLI::Validator output_file();
// An output folder that is not a file (it may not exist yet): checked before any work.
CLI::Validator output_folder();
// Applies threads.* and checks the BLAS: call before any tensor work.
void setup_runtime(const Config& config);
// This headcount binary (sweeps, reports and the launcher start it again).
std::filesystem::path self_executable();
// Joins the process group when started as one of several processes (torchrun / srun /
// headcount launch environment); does nothing for one process.
void setup_distributed(const Config& config, train::TrainOptions& o, int timeout_s);

}  // namespace headcount::cli
