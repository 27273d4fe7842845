// headcount reproduce: a whole experiment (baseline, lambda series with controls, retraining from
// scratch, target head counts against Michel et al., evaluations, reports) from one file.
#include <cstdio>

#include <fmt/ranges.h>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/log.h"
#include "headcount/sweep/reproduce.h"

namespace headcount::cli {

namespace {

struct ReproduceArgs {
  std::string file, out, profile, readme;
  int seeds = 0, workers = 1, cores = 0, calibrate = 3;
  bool dry_run = false, report_only = false;
};

// The report as the generated section of an experiment README (--readme).
void write_readme(const ReproduceArgs& a, const sweep::ExperimentSpec& spec) {
  if (a.readme.empty()) return;
  sweep::replace_readme_section(a.readme, sweep::readme_section(spec, a.out));
  std::printf("wrote the generated section of %s\n", a.readme.c_str());
}

void run_reproduce_command(const ReproduceArgs& a) {
  auto spec = sweep::load_experiment(a.file, a.profile);
  if (a.seeds > 0) spec.seeds = a.seeds;
  if (a.report_only) {
    std::printf("wrote %s\n", sweep::write_seed_report(spec, a.out).c_str());
    write_readme(a, spec);
    return;
  }
  sweep::ReproduceOptions o;
  o.out = a.out;
  o.executable = self_executable();
  o.workers = a.workers;
  o.cores = a.cores;
  o.dry_run = a.dry_run;
  o.calibrate_steps = a.calibrate;
  const auto r = sweep::run_reproduce(spec, o);
  if (a.dry_run) return;
  log::info("reproduce: {} piece(s) finished now, {} already done, {} failed, {} stopped", r.done,
            r.skipped, r.failed, r.interrupted);
  HC_CHECK(r.failed == 0,
           "{} piece(s) failed: {} (their logs are named above; run the same command again to "
           "retry them)",
           r.failed, fmt::join(r.failed_ids, ", "));
  if (r.interrupted > 0) {
    exit_status() = kExitInterrupted;
    return;
  }
  write_readme(a, spec);
}

}  // namespace

void add_reproduce_command(CLI::App& app) {
  auto a = std::make_shared<ReproduceArgs>();
  auto* cmd = app.add_subcommand(
      "reproduce",
      "Run a whole experiment from one file (baseline, lambda series and their controls, "
      "retraining from scratch, target head counts against Michel et al., beam evaluations, "
      "reports), resumably, with several seeds per cell");
  cmd->add_option("experiment", a->file,
                  "Experiment file (YAML): baseline, prune, series, scratch, targets, evaluate, "
                  "seeds, goals, profiles")
      ->required();
  cmd->add_option("--out", a->out, "Experiment folder (OUT/seed-S/RUN, OUT/results.md)")
      ->required()
      ->check(output_folder());
  cmd->add_option("--profile", a->profile,
                  "A profile of the file (e.g. quick): its keys replace the file's");
  cmd->add_option("--seeds", a->seeds, "Seeds per cell (1..K; default: the file's seeds)")
      ->check(integer_in(0, 1000));
  cmd->add_option("--workers", a->workers,
                  "Pieces at a time (CPU: the cores are split between them; one GPU: they share "
                  "it, as memory allows)")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  cmd->add_option("--cores", a->cores, "Thread budget to split (0: this machine's cores)")
      ->check(integer_in(0, 4096))
      ->capture_default_str();
  cmd->add_option("--calibrate", a->calibrate,
                  "Where nothing has finished here yet, time this many plain and gated training "
                  "steps of the experiment's model first, for the plan's estimates (0: prior "
                  "rates of a 2-core CPU)")
      ->check(integer_in(0, 100))
      ->capture_default_str();
  cmd->add_flag("--dry-run", a->dry_run, "Print the plan with its estimates; run nothing");
  cmd->add_flag("--report-only", a->report_only,
                "Rewrite OUT/results.md from what is there; run nothing");
  cmd->add_option("--readme", a->readme,
                  "Also write the report into this README, between its lines \"" +
                      std::string(sweep::kReadmeBegin) + "\" and \"" + sweep::kReadmeEnd +
                      "\" (figures the prose cites then come from the records)")
      ->check(CLI::ExistingFile);
  cmd->callback([a] { run_reproduce_command(*a); });
}

}  // namespace headcount::cli
