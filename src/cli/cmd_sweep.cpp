// headcount sweep / report: many runs from one file, and their table and plots.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <fmt/ranges.h>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/log.h"
#include "headcount/common/text.h"
#include "headcount/sweep/report.h"
#include "headcount/sweep/sweep.h"

namespace headcount::cli {

namespace {

struct SweepArgs {
  std::string file;
  std::string out;
  int workers = 1;
  int cores = 0;
  std::optional<size_t> only;
  std::vector<std::string> names;
  bool no_retrain = false;
  bool dry_run = false;
  bool status = false;
  std::string launcher = "local";
  bool submit = false;
  int srun_tasks = 0;
};

sweep::SweepOptions sweep_options(const SweepArgs& a) {
  sweep::SweepOptions o;
  o.out = a.out;
  o.executable = self_executable();
  o.workers = a.workers;
  o.cores = a.cores;
  o.only = a.only;
  o.names = a.names;
  o.no_retrain = a.no_retrain;
  o.srun_tasks = a.srun_tasks;
  return o;
}

// --launcher slurm: the sbatch script, submitted with --submit.
void write_slurm(const sweep::SweepSpec& spec, const SweepArgs& a, const sweep::SweepOptions& o) {
  const auto script = sweep::write_slurm_script(spec, o);
  std::printf("wrote %s (%zu array tasks)\n", script.c_str(), spec.points.size());
  if (a.submit)
    sweep::submit_slurm_script(script);
  else
    std::printf("submit it with: sbatch %s\n", script.c_str());
}

void run_sweep_command(const SweepArgs& a) {
  const auto spec = sweep::load_sweep(a.file);
  const sweep::SweepOptions o = sweep_options(a);
  if (a.dry_run || a.status) {
    if (a.dry_run)
      std::printf("%s", sweep::dry_run_listing(spec, a.file, o.out, a.cores, a.workers).c_str());
    std::printf("%s", sweep::status_table(spec, o.out).c_str());
    return;
  }
  if (a.launcher == "slurm") {
    write_slurm(spec, a, o);
    return;
  }
  HC_CHECK(!a.submit, "--submit goes with --launcher slurm");
  const auto r = sweep::run_sweep(spec, o);
  std::printf("%s", sweep::status_table(spec, o.out).c_str());
  if (r.failed > 0) {
    HC_FAIL("{} run(s) failed: {}", r.failed, fmt::join(r.failed_names, ", "));
  }
  if (!r.busy_names.empty()) {
    HC_FAIL("{} run(s) are being written by another process and were not started: {}",
            r.busy_names.size(), fmt::join(r.busy_names, ", "));
  }
  if (r.interrupted > 0) exit_status() = kExitInterrupted;
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand(
      "sweep",
      "Run one train or prune run per point of a grid (or list) of config values, N at a time, "
      "resumably; or write a Slurm array job for them");
  cmd->add_option("sweep", a->file,
                  "Sweep file (YAML): command, configs, set, grid / runs, controls, "
                  "baseline, retrain, slurm")
      ->required();
  cmd->add_option("--out", a->out, "Sweep folder: one run folder per point")
      ->required()
      ->check(output_folder());
  cmd->add_option("--workers", a->workers, "Runs at a time (the cores are split between them)")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  cmd->add_option("--cores", a->cores, "Thread budget to split (0: this machine's cores)")
      ->check(integer_in(0, 4096))
      ->capture_default_str();
  cmd->add_option("--only", a->only, "Run only the point with this index (0-based; Slurm tasks)")
      ->check(integer_in(0, INT32_MAX));
  cmd->add_option("--runs", a->names, "Run only the points with these names (comma-separated)")
      ->delimiter(',');
  cmd->add_flag("--no-retrain", a->no_retrain,
                "Leave the from-scratch retraining runs for a later invocation");
  cmd->add_flag("--dry-run", a->dry_run, "List the runs and their commands; run nothing");
  cmd->add_flag("--status", a->status, "Print each run's state and BLEU; run nothing");
  cmd->add_option("--launcher", a->launcher, "local: run here; slurm: write an sbatch array script")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  cmd->add_option("--srun-tasks", a->srun_tasks,
                  "Start each run as N data-parallel processes with srun (inside a Slurm job; "
                  "the sweep's sbatch script sets it from slurm.ntasks)")
      ->check(integer_in(0, 4096));
  cmd->add_flag("--submit", a->submit, "With --launcher slurm: also submit it with sbatch");
  cmd->callback([a] { run_sweep_command(*a); });
}

void add_report_command(CLI::App& app) {
  struct Args {
    std::string dir;
    std::string split;
    bool no_plots = false;
    int analysis = 0;
    std::string conllu;
    std::string sweep_file;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "report",
      "Table (results.csv, results.md) and plots of a sweep against its baseline and each run's "
      "zero-pruning control");
  cmd->add_option("dir", a->dir, "Sweep folder (the --out of `headcount sweep`)")->required();
  cmd->add_option("--split", a->split,
                  "Evaluate every checkpoint on dev, test or both (dev,test) with its decode "
                  "settings (cached): BLEU against each reference set of the split; the last "
                  "split listed is the one of the change columns and the plot; default: the dev "
                  "BLEU the runs logged");
  cmd->add_flag("--no-plots", a->no_plots, "Skip the gnuplot figures");
  cmd->add_option("--analysis", a->analysis,
                  "Also analyse each finished prune run on N sentences of the first --split "
                  "listed (dev by default): functions of the kept heads, L0 against importance "
                  "pruning (cached in RUN/analysis, RUN/analysis-test for test)")
      ->check(integer_in(0, 1000000));
  cmd->add_option("--conllu", a->conllu,
                  "With --analysis: dependency parses (CoNLL-U) of the split's source sentences, "
                  "for syntactic heads")
      ->check(CLI::ExistingFile);
  cmd->add_option("--sweep", a->sweep_file,
                  "The sweep file the runs came from, for a folder without sweep.json (a "
                  "sweep's committed records: their recorded evaluations stand where the "
                  "checkpoints are not here)")
      ->check(CLI::ExistingFile);
  cmd->callback([a] {
    sweep::ReportOptions o;
    o.dir = a->dir;
    o.sweep_file = a->sweep_file;
    o.executable = self_executable();
    if (!a->split.empty())
      for (const auto& s : text::split(a->split, ',')) o.splits.push_back(text::trim(s));
    o.plots = !a->no_plots;
    o.analysis_sentences = a->analysis;
    o.conllu = a->conllu;
    const auto r = sweep::write_report(o);
    std::printf("%s", r.markdown.c_str());
    std::printf("\nwrote %s and %s\n", (o.dir / "results.csv").c_str(),
                (o.dir / "results.md").c_str());
  });
}

}  // namespace headcount::cli
