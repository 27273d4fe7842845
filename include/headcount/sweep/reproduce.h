// `headcount reproduce EXPERIMENT.yaml --out DIR`: a whole pruning experiment from one file, as
// Voita et al.'s Table 1 is made: the baseline (trained in legs, or committed weights), lambda
// series with their zero-pruning controls, the pruned architectures retrained from scratch with the
// baseline's recipe (legs included), target head counts against Michel et al.'s importance pruning
// with the same fine-tuning, beam evaluations of every model on every split with the translations
// kept, then the reports. Each seed's runs form a sweep folder (OUT/seed-S, readable by `report`);
// OUT/results.md gathers the seeds: mean and standard deviation per cell, the change against the
// control as the mean of the paired (same-seed) differences with a paired t-test over the seeds.
//
//   baseline:                        # either committed weights ...
//     from: experiments/voita-table-cpu/baseline
//   # baseline: {configs: [configs/bible-base.yaml], set: {}, legs: [3000, 6000]}   # ... or
//   trained prune: {configs: [configs/bible-base.yaml, configs/bible-prune.yaml,
//   configs/bible-prune-gated.yaml], set: {}} series:
//   # each with its control (lambda 0) named NAME-l0
//     - {name: all, lambdas: [0.05, 0.1]}
//     - {name: enc, lambdas: [0.04], set: {prune.attention: [enc_self], prune.train_parts:
//     [encoder]}}
//   scratch: {configs: [configs/bible-base.yaml], legs: [3000, 6000], runs: [all-l0.1]}
//   targets:                         # L0 with a target head count, against Michel et al.
//     set: {prune.target_warmup_steps: 600}
//     runs: [{heads: 72}, {heads: 18, set: {prune.lagrangian_lr: 0.03}}]
//     compare_sentences: 0           # the analysis' sentences (0: all); its fine-tuning: the run's
//   evaluate: {splits: [dev, test], beam: 4}
//   seeds: 1                         # seeds 1..K (`seed`: data order, init, dropout, gates)
//   goals: [...]                     # checked in results.md (ExperimentGoal)
//   profiles:                        # --profile NAME: these top-level keys replace the file's
//     quick: {seeds: 2, ...}
//
// Every piece is a child process of this binary; a piece is done when its marker OUT/steps/ID.json
// (exit status, seconds, training steps, provenance) exists, so running the command again after
// any interruption skips what is done and resumes the rest from its checkpoints.
#pragma once

#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "headcount/sweep/sweep.h"

namespace headcount::sweep {

struct ExperimentSeries {
  std::string name;
  Assignments set;
  std::vector<std::string> lambdas;  // as written ("0.05"); the control (0) is added
};

struct ExperimentTarget {
  int64_t heads = 0;
  Assignments set;
  std::string control;  // "" : the first series' control
};

// A goal checked on the seeds' means (results.md): `kind` is
//   control_gain    the control's change against the baseline is at most `max` (the first split)
//   removed_within  some run removes at least `fraction` of the heads of `heads_of` (enc_self,
//                   dec_self, enc_dec or all) within `within` BLEU of its control, on every split
//                   (heads kept: the mean over the seeds); if none is, the result names the run
//                   that removes enough with the smallest loss
//   scratch_within  every from-scratch run is within `within` BLEU of its pruned run, every split
struct ExperimentGoal {
  std::string text, kind, heads_of = "all";
  double max = 0, fraction = 0, within = 0;
};

struct ExperimentSpec {
  fs::path file;
  std::string profile;
  fs::path baseline_from;  // committed weights (a checkpoint folder), or train:
  std::vector<std::string> baseline_configs;
  Assignments baseline_set;
  std::vector<int64_t> baseline_legs;
  std::vector<std::string> prune_configs;
  Assignments prune_set;
  std::vector<ExperimentSeries> series;
  std::vector<std::string> scratch_configs;
  Assignments scratch_set;
  std::vector<int64_t> scratch_legs;
  std::vector<std::string> scratch_runs;
  Assignments target_set;
  std::vector<ExperimentTarget> targets;
  int compare_sentences = 0;
  std::vector<std::string> splits = {"dev", "test"};
  int beam = 4;
  int seeds = 1;
  std::vector<ExperimentGoal> goals;
};

// Parses and checks an experiment file (with --profile's keys replacing the file's); every run's
// config is resolved once, so a misspelt key is reported with the file's line before anything runs.
ExperimentSpec load_experiment(const fs::path& file, const std::string& profile = "");

// The prune runs of one seed as a sweep (OUT/seed-S/sweep.json, what `report` reads).
SweepSpec seed_sweep(const ExperimentSpec& e, const fs::path& out, int seed);

// One piece of the plan: a child process of headcount (or, for kind "copy", the baseline's weights
// copied into OUT/baseline).
struct Step {
  std::string id;    // "seed-1/all-l0.1/prune", also its marker's name
  std::string kind;  // copy, train, prune, eval, compare, report
  std::vector<std::string> args;
  fs::path log;
  std::vector<size_t> deps;  // steps that must be done first
  int64_t train_steps = 0;   // training steps it runs (train, prune, compare's fine-tuning)
  int64_t splits = 0;        // splits it decodes (eval: 1; compare's analysis: about 2)
  // The run folder the piece trains in (a pruning run, a first training leg, compare's
  // fine-tuning), empty for the rest: when a piece that was done runs again because one it depends
  // on is not, this folder and its marker go to OUT/stale/STAMP/, so it starts afresh instead of
  // resuming the run built on what is being redone.
  fs::path fresh_dir;
};

struct Plan {
  std::vector<Step> steps;
  fs::path baseline;  // the checkpoint every prune run starts from
};

// The whole plan into `out` with `threads_blas` BLAS threads per process (0: leave threads alone).
Plan make_plan(const ExperimentSpec& e, const fs::path& out, int threads_blas);

// Seconds per training step and per evaluated split for an estimate: measured from the markers of
// the pieces finished on this machine where there are any; else calibrated before the first piece
// (calibrate_rates); else prior figures of a 2-core CPU.
struct Rates {
  enum class Source { kPrior, kCalibrated, kMeasured };
  double prune_step_s = 0, train_step_s = 0, eval_split_s = 0;
  Source source = Source::kPrior;
};
double estimate_seconds(const Step& s, const Rates& r);

// Rates timed now on this machine and the device the runs take: `steps` plain and `steps` gated
// training steps (after one of warm-up) of the experiment's model at its batch size, on random
// batches (bench train's measurement, threads as the prune runs' config sets them). A split's
// beam evaluation is not timed: it is the prior scaled by the same speed-up as a training step.
Rates calibrate_rates(const ExperimentSpec& e, int steps);

struct ReproduceOptions {
  fs::path out;
  fs::path executable;
  int workers = 1;
  int cores = 0;
  bool dry_run = false;  // print the plan and the estimates, run nothing
  // Training steps of calibrate_rates before the plan is printed, where no piece has finished on
  // this machine yet (0: the prior rates).
  int calibrate_steps = 3;
};

struct ReproduceOutcome {
  int done = 0, skipped = 0, failed = 0, interrupted = 0;
  std::vector<std::string> failed_ids;
};

// The plan as a table: each piece, its state and its estimate, with the total.
std::string plan_table(const Plan& plan, const fs::path& out, const Rates& rates);
// Runs the plan (N pieces at once), skipping finished pieces; writes OUT/results.md at the end.
ReproduceOutcome run_reproduce(const ExperimentSpec& e, const ReproduceOptions& o);

// The seeds' summary: mean, sample standard deviation, and the two-sided p-value of a one-sample t
// test of the mean against 0 (paired differences), nullopt with fewer than two values.
struct SeedStats {
  size_t n = 0;
  double mean = 0;
  std::optional<double> sd, p;
};
SeedStats seed_stats(const std::vector<double>& values);
// The paired differences of two settings' values per seed: the i-th of `run` minus the i-th of
// `against`, over the seeds both have, where both have a value. A setting of one value (a baseline
// shared by every seed) is paired with each of the other's.
std::vector<double> paired_differences(const std::vector<std::optional<double>>& run,
                                       const std::vector<std::optional<double>>& against);
// P(|T| >= |t|) for Student's t with `df` degrees of freedom (the regularised incomplete beta).
double t_test_two_sided_p(double t, double df);
// As tables print them: "33.72 ± 0.20" ("missing" without values, the mean alone with one) and a
// change "-0.63 ± 0.12 (p 0.081)" (empty without values).
std::string seed_mean_sd(const SeedStats& s);
std::string seed_change(const SeedStats& s);

// The goals of the experiment checked on `numbers` (results.json: per row its kind, heads "e/d/de"
// and per split {n, mean, sd} and SPLIT_change {n, mean, sd, p}), as a markdown section.
std::string goals_section(const ExperimentSpec& e, const nlohmann::json& numbers);

// OUT/results.md and OUT/results.json from the seeds' folders (after each seed's `report`).
// Returns the path of results.md.
std::string write_seed_report(const ExperimentSpec& e, const fs::path& out);

// The markers of finished pieces (OUT/steps/*.json: id, kind, seconds, train_steps, splits,
// finished_at, provenance), those that parse; none without OUT/steps.
std::vector<nlohmann::json> step_markers(const fs::path& out);

// A marker's clock: "YYYY-MM-DD HH:MM:SS" in UTC, and back (nullopt for other text).
std::string utc_clock(std::time_t t);
std::optional<std::time_t> parse_utc_clock(const std::string& text);

// The pieces as `reproduce` timed them (OUT/steps/*.json), the report's benchmark of the
// experiment's time: per kind the count and wall minutes, the whole one piece at a time, and the
// wall clock from the first piece's start to the last's end ("" where OUT has no markers).
std::string pieces_section(const fs::path& out);

// The report as a section of an experiment's README: results.md without its title, its headings
// one level down, OUT for the folder's path.
std::string readme_section(const ExperimentSpec& e, const fs::path& out);

// The markers of the generated section of a README (each alone on its line).
inline constexpr const char* kReadmeBegin =
    "<!-- begin: generated by headcount reproduce --report-only --readme; do not edit -->";
inline constexpr const char* kReadmeEnd = "<!-- end: generated by headcount reproduce -->";

// Replaces what lies between the markers of `readme` with `section` (written atomically); a
// README without both markers, in that order and once each, is an error naming it. `begin` and
// `end`: another command's markers (headcount table's).
void replace_readme_section(const fs::path& readme, const std::string& section,
                            const std::string& begin = kReadmeBegin,
                            const std::string& end = kReadmeEnd);

}  // namespace headcount::sweep
