// Sweeps: one YAML file names a base config (for `train` or `prune`) and the config keys to vary,
// as a grid or as an explicit list of runs. Each point becomes a run folder named from its values;
// runs execute as child processes of the same executable (a failing run cannot take the others
// down), N at a time with the thread budget split between them, or as a Slurm array job.
//
//   command: prune                       # train | prune (required)
//   configs: [configs/bible.yaml, configs/bible-base.yaml, configs/bible-prune.yaml,
//             configs/bible-prune-gated.yaml]
//   set: {train.max_steps: 4000}         # fixed overrides for every run
//   grid:                                # every combination, in this order
//     prune.lambda: [0.01, 0.05, 0.1]
//     prune.attention: [[enc_self], [enc_self, dec_self, enc_dec]]
//   runs:                                # explicit points, after the grid's (optional)
//     - {prune.target_heads: 12, name: target-12}
//   baseline: runs/bible-base            # the run the report compares against (optional)
//   retrain:                             # train every pruned architecture from scratch (optional)
//     configs: [configs/bible.yaml, configs/bible-base.yaml]
//     set: {}
//   slurm: {partition: cpu, cpus_per_task: 2, mem: 16G, time: "24:00:00", ntasks: 1}
//
// Paths in the file are relative to the current directory, like those given on a command line.
//
// Controls (prune sweeps): fine-tuning alone changes BLEU, so each pruned run is compared with a
// zero-pruning control, a run of the same setting with prune.lambda 0 and the same budget. The
// controls are the points listed in `controls:` or marked `control: true` in `runs:`. Every other
// point gets its control: the one its `control: NAME` gives, or else the one control whose values
// agree with the point's on every axis except the pruning-strength keys (kStrengthKeys; a key a
// point does not set counts as unset, equal only to unset); none matching: no control; several: an
// error (give the run `control: NAME`). A control that prunes (prune.lambda or prune.target_heads
// not 0, or prune.target_heads_per_type set) is allowed with a warning. The report shows each run's
// BLEU against its control's.
//
//   grid: {prune.lambda: [0, 0.05, 0.2]}
//   controls: [lambda-0]                 # lambda-0.05 and lambda-0.2 match it
//   runs:                                # enc-t8 names its control; the others are matched
//     - {name: enc-l0, prune.lambda: 0, prune.attention: [enc_self], control: true}
//     - {name: enc-l0.1, prune.lambda: 0.1, prune.attention: [enc_self]}  # matches enc-l0
//     - {name: enc-t8, prune.target_heads: 8, prune.attention: [enc_self], control: enc-l0}
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headcount/common/config.h"

namespace headcount::sweep {

namespace fs = std::filesystem;

// key -> value as YAML text (scalars as written, sequences in flow style: "[enc_self, dec_self]").
using Assignments = std::vector<std::pair<std::string, std::string>>;

struct SweepPoint {
  std::string name;         // run folder name
  Assignments values;       // the swept keys and this point's values
  bool is_control = false;  // a zero-pruning control
  std::string control;      // the name of this point's control ("" : none, or a control itself)
};

// The keys that set how strongly a prune run prunes, ignored when matching a point to its control:
// prune.lambda, prune.lambda_schedule, prune.lambda_warmup_steps, prune.lambda_steps,
// prune.lambda_values, prune.target_heads, prune.target_heads_per_type, prune.target_warmup_steps,
// prune.lagrangian_lr.
extern const std::vector<std::string> kStrengthKeys;

struct SlurmSpec {
  std::string partition;
  std::string account;
  std::string time = "24:00:00";
  std::string mem = "16G";
  int cpus_per_task = 2;
  int ntasks = 1;                  // processes per run (data-parallel training, started with srun)
  std::vector<std::string> extra;  // further "#SBATCH ..." lines, given without the prefix
};

struct SweepSpec {
  fs::path file;
  std::string command = "prune";
  std::vector<std::string> configs;
  Assignments set;
  std::vector<std::string> axes;  // the keys varied, in file order
  std::vector<SweepPoint> points;
  std::string baseline;
  bool retrain = false;
  std::vector<std::string> retrain_configs;
  Assignments retrain_set;
  SlurmSpec slurm;
};

// Parses and validates a sweep file: every point's config is resolved once, so a misspelt key or
// a bad value is reported with the sweep file's line before anything runs.
SweepSpec load_sweep(const fs::path& file);

// The resolved config of one point (base configs, then `set`, then the point's values).
Config resolve_point(const SweepSpec& spec, const SweepPoint& point);

// The run folder name for a set of values: "lambda-0.05_attention-enc_self+dec_self". Keys are
// shortened to their last component unless two axes share it.
std::string point_name(const Assignments& values, const std::vector<std::string>& axes);

// One child process: a point's run, or the from-scratch retraining of its pruned architecture.
struct Job {
  size_t point = 0;
  bool retrain = false;
  std::string name;               // "lambda-0.05" or "lambda-0.05/scratch"
  fs::path dir;                   // its run folder
  std::vector<std::string> args;  // after the executable
};
// `threads_blas` > 0 adds threads.intra_op=1 and threads.blas=N unless the sweep sets threads.*.
Job point_job(const SweepSpec& spec, size_t point, const fs::path& out, int threads_blas);
Job retrain_job(const SweepSpec& spec, size_t point, const fs::path& out, int threads_blas);

enum class RunState { kPending, kInterrupted, kRunning, kDone, kFailed };
const char* state_name(RunState s);
// What a run folder says about its run (kRunning is only known to the sweep that runs it).
RunState run_state(const fs::path& dir);
// A finished prune run that removed no head: its architecture is the baseline's, so retraining
// it from scratch would only repeat the baseline (sweeps skip it, reports say so).
bool nothing_pruned(const fs::path& prune_run);
// The best dev BLEU a run has logged so far (its final BLEU for a finished prune run).
std::optional<double> run_bleu(const fs::path& dir);

struct SweepOptions {
  fs::path out;
  fs::path executable;  // the headcount binary the runs are started with
  int workers = 1;
  int cores = 0;               // thread budget to split between workers; 0 = this machine's cores
  std::optional<size_t> only;  // run this point alone (a Slurm array task)
  std::vector<std::string> names;  // non-empty: run only the points with these names
  bool no_retrain = false;         // leave the retraining runs for a later invocation
  bool dry_run = false;
  int srun_tasks = 0;  // > 1: start each run as `srun --ntasks=N headcount ...` (Slurm job)
};

struct SweepOutcome {
  int done = 0, failed = 0, skipped = 0, interrupted = 0;
  std::vector<std::string> failed_names;
  std::vector<std::string> busy_names;  // runs another process was writing: not started
};

// The manifest a sweep writes to OUT/sweep.json and the report reads: the command, configs, axes,
// baseline, whether it retrains, and each point's name, values and control.
nlohmann::json sweep_manifest(const SweepSpec& spec);

// Writes OUT/sweep.json (the manifest the report reads) and runs what is not finished, holding
// OUT's lock (a second sweep on OUT is an error; with --only, each run's own lock suffices).
// Returns when every job has finished or failed, or after SIGINT/SIGTERM: the first signal is
// passed on once to every run (each in its own process group, so a terminal's Ctrl-C reaches the
// sweep alone), which saves a checkpoint and stops; a second signal stops them at once. Children
// get SIGTERM when the sweep dies (PR_SET_PDEATHSIG): none outlives it unnoticed.
SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options);

// Runs `executable args...` to completion with its output appended to `log`; returns its exit
// code (-1 when killed by a signal).
int run_command(const fs::path& executable, const std::vector<std::string>& args,
                const fs::path& log);

// A table of the runs and their states (for --dry-run and --status), with each run's control.
std::string status_table(const SweepSpec& spec, const fs::path& out);

// Writes OUT/sweep.sbatch, an array job with one task per point, each running
// `headcount sweep FILE --out OUT --only $SLURM_ARRAY_TASK_ID`. Returns its path.
fs::path write_slurm_script(const SweepSpec& spec, const SweepOptions& options);

// Submits a script of write_slurm_script with sbatch (whose output goes to this process's).
void submit_slurm_script(const fs::path& script);

// What `headcount sweep --dry-run` lists: the runs of `file` into `out` and the command each (and
// its retraining) would run, with the thread budget `cores` (0: this machine's online processors)
// split between `workers`.
std::string dry_run_listing(const SweepSpec& spec, const std::string& file, const fs::path& out,
                            int cores, int workers);

}  // namespace headcount::sweep
