// `headcount reproduce`: the experiment file, the plan, the seeds' statistics, and a whole tiny
// experiment run end to end with two seeds and resumed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "headcount/common/io.h"
#include "headcount/sweep/reproduce.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::error_of;
using testing::TempDir;
namespace fs = std::filesystem;
using json = nlohmann::json;

TEST(Reproduce, TTestMatchesClosedFormsAndTables) {
  constexpr double kPi = 3.14159265358979323846;
  // One degree of freedom: Cauchy, P(|T| >= t) = 1 - 2 atan(t) / pi.
  for (double t : {0.25, 1.0, 3.0, 12.7062})
    EXPECT_NEAR(sweep::t_test_two_sided_p(t, 1), 1 - 2 * std::atan(t) / kPi, 1e-10) << t;
  // Two: P(|T| >= t) = 1 - t / sqrt(t^2 + 2).
  for (double t : {0.1, 1.0, 4.302653, 10.0})
    EXPECT_NEAR(sweep::t_test_two_sided_p(-t, 2), 1 - t / std::sqrt(t * t + 2), 1e-10) << t;
  // Printed tables' two-sided 5% critical values.
  EXPECT_NEAR(sweep::t_test_two_sided_p(2.776445, 4), 0.05, 1e-6);
  EXPECT_NEAR(sweep::t_test_two_sided_p(2.228139, 10), 0.05, 1e-6);
  EXPECT_NEAR(sweep::t_test_two_sided_p(2.042272, 30), 0.05, 1e-6);
  EXPECT_NEAR(sweep::t_test_two_sided_p(9.924843, 2), 0.01, 1e-6);
  EXPECT_DOUBLE_EQ(sweep::t_test_two_sided_p(0, 5), 1.0);

  const auto s = sweep::seed_stats({1, 2, 3, 4});
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  ASSERT_TRUE(s.sd && s.p);
  EXPECT_NEAR(*s.sd, std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_NEAR(*s.p, sweep::t_test_two_sided_p(2.5 / (std::sqrt(5.0 / 3.0) / 2), 3), 1e-12);
  const auto one = sweep::seed_stats({0.7});
  EXPECT_DOUBLE_EQ(one.mean, 0.7);
  EXPECT_FALSE(one.sd || one.p);  // one seed: no spread, no test
  EXPECT_EQ(sweep::seed_stats({}).n, 0u);
}

// A checkpoint folder as the file checks see it (a baseline given by `from`).
fs::path fake_checkpoint(const TempDir& dir) {
  fs::create_directories(dir / "ckpt");
  io::write_file_atomic(dir / "ckpt" / "architecture.json", "{}");
  io::write_file_atomic(dir / "ckpt" / "model.pt", "");
  return dir / "ckpt";
}

fs::path tiny_base(const TempDir& dir) {
  Config c = tiny_run_config(dir, 64);
  c.train.eval_every = 10;
  save_config(c, dir / "base.yaml");
  return dir / "base.yaml";
}

std::string experiment_text(const fs::path& base, const std::string& baseline) {
  return fmt::format(R"(baseline: {}
prune: {{configs: [{}], set: {{train.max_steps: 20}}}}
series:
  - {{name: all, lambdas: [0.5, 1.0]}}
  - {{name: enc, lambdas: [0.1], set: {{prune.attention: [enc_self]}}}}
scratch: {{configs: [{}], legs: [5, 10], runs: [all-l1]}}
targets:
  set: {{prune.target_warmup_steps: 5}}
  runs: [{{heads: 2, set: {{prune.lagrangian_lr: 0.05}}}}]
seeds: 2
profiles:
  quick: {{seeds: 3, series: [{{name: all, lambdas: [0.2, 1.0]}}]}}
)",
                     baseline, base.string(), base.string());
}

// A piece's marker in OUT/steps as `reproduce` writes it: its kind, seconds and end (UTC).
void write_marker(const fs::path& out, const std::string& name, const std::string& kind,
                  int seconds, const std::string& finished_at) {
  io::write_file_atomic(
      out / "steps" / (name + ".json"),
      json{{"kind", kind}, {"seconds", seconds}, {"finished_at", finished_at}}.dump());
}

TEST(Reproduce, PiecesSectionSumsEachKindAndSpansTheWallClock) {
  TempDir out;
  EXPECT_EQ(sweep::pieces_section(out.path()), "");  // no markers: no section
  fs::create_directories(out.path() / "steps");
  // A pruning run of 120 s that ended at 00:02:00 (so began at 00:00:00), an evaluation of 30 s
  // that ended at 00:03:00, another pruning run of 15 s: 135 s of pruning, 165 s in all.
  write_marker(out.path(), "a", "prune", 120, "2026-01-01 00:02:00");
  write_marker(out.path(), "b", "eval", 30, "2026-01-01 00:03:00");
  write_marker(out.path(), "c", "prune", 15, "2026-01-01 00:02:20");
  const std::string md = sweep::pieces_section(out.path());
  EXPECT_NE(md.find("| eval | 1 | 0.5 |\n| prune | 2 | 2.2 |\n| all | 3 | 2.8 |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Wall clock: 2026-01-01 00:00:00 to 2026-01-01 00:03:00 UTC, 3.0 minutes."),
            std::string::npos)
      << md;
  // The markers' clock is UTC both ways; other text is not a time.
  EXPECT_EQ(sweep::utc_clock(0), "1970-01-01 00:00:00");
  EXPECT_EQ(sweep::parse_utc_clock("1970-01-02 00:00:01"), std::optional<std::time_t>(86401));
  EXPECT_FALSE(sweep::parse_utc_clock("1970-01-02 00:00:01 CET").has_value());
  EXPECT_FALSE(sweep::parse_utc_clock("yesterday").has_value());
}

TEST(Reproduce, PiecesSectionNamesTheStretchesOfAResumedExperiment) {
  TempDir out;
  fs::create_directories(out.path() / "steps");
  // 00:00-00:02 and 00:02:30-00:03 (a 30 s gap: one stretch), then a day later 00:00-00:01.
  write_marker(out.path(), "a", "prune", 120, "2026-01-01 00:02:00");
  write_marker(out.path(), "b", "eval", 30, "2026-01-01 00:03:00");
  write_marker(out.path(), "c", "eval", 60, "2026-01-02 00:01:00");
  const std::string md = sweep::pieces_section(out.path());
  EXPECT_NE(md.find("| all | 3 | 3.5 |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("Wall clock: 2026-01-01 00:00:00 to 2026-01-02 00:01:00 UTC, 1441.0 minutes, "
                    "resumed 1 time(s) after a pause: the pieces ran in 2 stretches of 4.0 "
                    "minutes together: 2026-01-01 00:00:00 to 2026-01-01 00:03:00 (3.0 minutes); "
                    "2026-01-02 00:00:00 to 2026-01-02 00:01:00 (1.0 minutes)."),
            std::string::npos)
      << md;
}

// A results.json row as the gathering writes it: heads, kind and the changes against its control.
json goal_row(const std::string& kind, const std::string& heads, double dev, double test) {
  json r = {{"kind", kind}, {"heads", heads}};
  if (kind != "baseline") {
    r["dev_change"] = {{"mean", dev}, {"n", 2}};
    r["test_change"] = {{"mean", test}, {"n", 2}};
  }
  return r;
}

TEST(Reproduce, GoalsAreReadOnTheSeedsMeansAndNameTheNearestRun) {
  sweep::ExperimentSpec e;
  e.goals = {{"controls", "control_gain", "all", 0.3, 0, 0},
             {"encoder", "removed_within", "enc_self", 0, 0.75, 0.5},
             {"scratch", "scratch_within", "all", 0, 0, 1.0}};
  json n = {{"baseline", goal_row("baseline", "48/48/48", 0, 0)},
            {"all-l0", goal_row("control", "48/48/48", 0.2, -0.1)},
            // 48 - (10 + 14) / 2 = 36 removed: exactly 75%, but 1.5 below on dev.
            {"enc-a", goal_row("pruned", "10/48/48, 14/48/48", -1.5, -1.2)},
            // 46 removed (96%), 0.6 below on test: nearer the goal than enc-a.
            {"enc-b", goal_row("pruned", "2/48/48", -0.1, -0.6)},
            // Only 20 removed: not enough, however good.
            {"enc-c", goal_row("pruned", "28/48/48", +0.3, +0.2)},
            {"enc-a/scratch", goal_row("scratch", "10/48/48, 14/48/48", -0.8, -1.2)}};
  std::string md = sweep::goals_section(e, n);
  EXPECT_NE(md.find("| controls | all-l0: dev +0.20, test -0.10 against the baseline | yes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| encoder | not within; the nearest: enc-b removes 46 of 48 (96%) at dev "
                    "-0.10, test -0.60 against its control | no |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| scratch | enc-a/scratch: dev -0.80, test -1.20 against from trained | no |"),
            std::string::npos)
      << md;
  // Within the margin on both splits: met by the run that removes the most among those within.
  n["enc-b"] = goal_row("pruned", "2/48/48, 3/48/48", -0.4, -0.5);
  n["enc-a"] = goal_row("pruned", "10/48/48, 14/48/48", -0.1, -0.2);
  n["all-l0"] = goal_row("control", "48/48/48", 0.4, 0.0);
  n["enc-a/scratch"] = goal_row("scratch", "10/48/48, 14/48/48", -0.8, -0.9);
  md = sweep::goals_section(e, n);
  EXPECT_NE(md.find("| encoder | enc-b removes 45.5 of 48 (95%) at dev -0.40, test -0.50 against "
                    "its control | yes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| controls | all-l0: dev +0.40, test +0.00 against the baseline | no |"),
            std::string::npos)
      << md;
  EXPECT_NE(
      md.find("| scratch | enc-a/scratch: dev -0.80, test -0.90 against from trained | yes |"),
      std::string::npos)
      << md;
  // Three seeds of a large model: 300.3 heads kept of 1,536 on their mean, 1235.7 removed.
  n = {{"baseline", goal_row("baseline", "512/512/512", 0, 0)},
       {"big", goal_row("pruned", "100/100/101, 100/100/100, 100/100/100", -0.1, -0.2)}};
  e.goals = {{"half", "removed_within", "all", 0, 0.5, 0.5}};
  EXPECT_NE(sweep::goals_section(e, n).find("big removes 1235.7 of 1536 (80%)"), std::string::npos)
      << sweep::goals_section(e, n);
  // Malformed heads are not read as a count.
  n["baseline"] = goal_row("baseline", "48/48", 0, 0);
  EXPECT_NE(sweep::goals_section(e, n).find("the baseline's heads are not known | no |"),
            std::string::npos);
}

TEST(Reproduce, ExperimentFileNamesRunsControlsSeedsAndPlan) {
  TempDir dir;
  const auto base = tiny_base(dir);
  const auto ckpt = fake_checkpoint(dir);
  io::write_file_atomic(dir / "e.yaml",
                        experiment_text(base, fmt::format("{{from: {}}}", ckpt.string())));
  const auto e = sweep::load_experiment(dir / "e.yaml");
  EXPECT_EQ(e.seeds, 2);
  const fs::path out = dir / "out";
  const auto s2 = sweep::seed_sweep(e, out, 2);
  std::vector<std::string> names, controls;
  for (const auto& p : s2.points) names.push_back(p.name), controls.push_back(p.control);
  EXPECT_EQ(names, (std::vector<std::string>{"all-l0", "all-l0.5", "all-l1", "enc-l0", "enc-l0.1",
                                             "target-2"}));
  EXPECT_EQ(controls, (std::vector<std::string>{"", "all-l0", "all-l0", "", "enc-l0", "all-l0"}));
  const Config c = sweep::resolve_point(s2, s2.points[4]);
  EXPECT_EQ(c.seed, 2);
  EXPECT_EQ(c.prune.attention, (std::vector<std::string>{"enc_self"}));
  EXPECT_DOUBLE_EQ(c.prune.lambda, 0.1);
  EXPECT_EQ(c.prune.init_from, (out / "baseline" / "checkpoints" / "best").string());
  const Config t = sweep::resolve_point(s2, s2.points[5]);
  EXPECT_EQ(t.prune.target_heads, 2);
  EXPECT_DOUBLE_EQ(t.prune.lagrangian_lr, 0.05);

  const auto plan = sweep::make_plan(e, out, 1);
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    at[plan.steps[i].id] = i;
    for (size_t d : plan.steps[i].deps) EXPECT_LT(d, i) << plan.steps[i].id;  // ordered
  }
  ASSERT_TRUE(at.count("seed-2/all-l1/scratch/leg-10"));
  const auto& leg2 = plan.steps[at["seed-2/all-l1/scratch/leg-10"]];
  EXPECT_EQ(leg2.deps, (std::vector<size_t>{at["seed-2/all-l1/scratch/leg-5"]}));
  EXPECT_EQ(leg2.train_steps, 5);  // from step 5 to step 10
  const auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  EXPECT_TRUE(has(leg2.args, "train.max_steps=10"));
  EXPECT_TRUE(has(leg2.args, "seed=2"));
  EXPECT_TRUE(has(leg2.args, (out / "seed-2" / "all-l1" / "pruned").string()));
  const auto& ev = plan.steps[at["seed-1/target-2/michel/eval-michel-finetuned-test"]];
  EXPECT_TRUE(has(ev.args, "4"));  // beam 4 by default
  EXPECT_EQ(ev.deps, (std::vector<size_t>{at["seed-1/target-2/compare"]}));
  EXPECT_FALSE(at.count("seed-1/all-l0.5/scratch/leg-5"));  // not listed in scratch: runs
  EXPECT_EQ(plan.steps[at["seed-1/report"]].deps.size(),
            2u + 6 * 3 + 3 + 3);  // baseline evals, runs + evals, compare + evals, last leg + evals

  // Michel's fine-tuning gets the target run's steps (no rewind here), as its ETA counts them; a
  // run whose recovery steps start again from the unpruned weights gives Michel those steps only
  // (analysis::finetune_budget, tested with the fine-tuning's config in AnalysisRecords).
  EXPECT_EQ(plan.steps[at["seed-1/target-2/compare"]].train_steps, 20);
  EXPECT_EQ(plan.steps[at["seed-1/target-2/prune"]].train_steps, 20);
  {
    std::string text = experiment_text(base, fmt::format("{{from: {}}}", ckpt.string()));
    const std::string lr = "prune.lagrangian_lr: 0.05";
    text.replace(text.find(lr), lr.size(), lr + ", prune.recovery_steps: 12, prune.rewind: true");
    io::write_file_atomic(dir / "rewind.yaml", text);
    const auto rp = sweep::make_plan(sweep::load_experiment(dir / "rewind.yaml"), out, 1);
    std::map<std::string, int> steps;
    for (const auto& step : rp.steps) steps[step.id] = step.train_steps;
    EXPECT_EQ(steps["seed-1/target-2/compare"], 12);
    EXPECT_EQ(steps["seed-1/target-2/prune"], 20);
  }

  // Every piece done but one run (as after a lambda was added to the file): that run, its
  // evaluations and its seed's report are pending; the other seed's report stays done.
  fs::create_directories(out / "steps");
  for (const auto& s : plan.steps) {
    std::string name = s.id;
    std::replace(name.begin(), name.end(), '/', '~');
    if (s.id != "seed-1/enc-l0.1/prune")
      io::write_file_atomic(out / "steps" / (name + ".json"), "{}");
  }
  const std::string table = sweep::plan_table(plan, out, sweep::Rates{});
  const auto state = [&](const std::string& id) {
    const size_t at = table.find("\n" + id + " ");
    if (at == std::string::npos) return std::string("?");
    const std::string line = table.substr(at + 1, table.find('\n', at + 1) - at - 1);
    for (const std::string s : {"pending", "again", "done"})
      if (line.find(" " + s + " ") != std::string::npos) return s;
    return std::string("?");
  };
  EXPECT_EQ(state("seed-1/enc-l0.1/prune"), "pending") << table;
  // Done before, but what they depend on is not: they run again (afresh).
  for (const std::string id :
       {"seed-1/enc-l0.1/eval-dev", "seed-1/enc-l0.1/eval-test", "seed-1/report"})
    EXPECT_EQ(state(id), "again") << id << "\n" << table;
  for (const std::string id : {"seed-1/enc-l0/prune", "seed-1/all-l1/scratch/leg-10",
                               "seed-2/enc-l0.1/eval-dev", "seed-2/report"})
    EXPECT_EQ(state(id), "done") << id << "\n" << table;
  EXPECT_NE(table.find(fmt::format("{} pieces, {} done, 3 to run again", plan.steps.size(),
                                   plan.steps.size() - 4)),
            std::string::npos)
      << table;

  const auto q = sweep::load_experiment(dir / "e.yaml", "quick");
  EXPECT_EQ(q.seeds, 3);
  ASSERT_EQ(q.series.size(), 1u);
  EXPECT_EQ(q.series[0].lambdas, (std::vector<std::string>{"0.2", "1.0"}));
}

TEST(Reproduce, CalibrationTimesTheExperimentsModelBeforeTheFirstPiece) {
  // The plan's estimates on a machine where nothing has finished yet: training steps of the
  // experiment's own (here tiny) model timed now, not the prior rates of the Bible model on a
  // 2-core CPU (1.5 s a pruning step, 1.2 s a training step, 60 s a split).
  TempDir dir;
  const auto base = tiny_base(dir);
  const auto ckpt = fake_checkpoint(dir);
  io::write_file_atomic(dir / "e.yaml",
                        experiment_text(base, fmt::format("{{from: {}}}", ckpt.string())));
  const auto e = sweep::load_experiment(dir / "e.yaml");
  const auto r = sweep::calibrate_rates(e, 2);
  EXPECT_EQ(r.source, sweep::Rates::Source::kCalibrated);
  EXPECT_GT(r.train_step_s, 0.0);
  EXPECT_GT(r.prune_step_s, 0.0);
  // d 32, one layer, 256 tokens a step: milliseconds, far below the priors. The bound is only
  // what tells a measurement from a prior (0.3 s was seen under ASan on a busy machine).
  EXPECT_LT(r.train_step_s, 1.0);
  EXPECT_LT(r.prune_step_s, 1.0);
  // The evaluation is the prior scaled by the training step's speed-up (60 s / 1.2 s = 50 steps).
  EXPECT_NEAR(r.eval_split_s / r.train_step_s, 50.0, 1e-9);
  const auto plan = sweep::make_plan(e, dir / "out", 1);
  const std::string table = sweep::plan_table(plan, dir / "out", r);
  EXPECT_NE(table.find("rates calibrated on this machine"), std::string::npos) << table;
  const std::string err = error_of([&] { sweep::calibrate_rates(e, 0); });
  EXPECT_NE(err.find("--calibrate must be at least 1 step"), std::string::npos) << err;
}

TEST(Reproduce, BadExperimentFilesAreClearErrors) {
  TempDir dir;
  const auto base = tiny_base(dir);
  const auto ckpt = fake_checkpoint(dir);
  const std::string good = experiment_text(base, fmt::format("{{from: {}}}", ckpt.string()));
  const auto error_for = [&](const std::string& text, const std::string& profile = "") {
    io::write_file_atomic(dir / "bad.yaml", text);
    return error_of([&] { sweep::load_experiment(dir / "bad.yaml", profile); });
  };
  EXPECT_NE(error_for(good + "sedes: 3\n").find("bad.yaml:13: unknown key 'sedes'"),
            std::string::npos)
      << error_for(good + "sedes: 3\n");
  std::string s = good;
  s.replace(s.find("runs: [all-l1]"), 14, "runs: [all-l0]");
  EXPECT_NE(error_for(s).find("'all-l0' is not a pruning run"), std::string::npos);
  s = good;
  s.replace(s.find("[0.5, 1.0]"), 10, "[-0.5]");
  EXPECT_NE(error_for(s).find("lambda -0.5 must be positive"), std::string::npos);
  s = good;
  s.replace(s.find("prune.attention"), 15, "prune.atention");
  const auto e = error_for(s);
  EXPECT_NE(e.find("run enc-l0"), std::string::npos) << e;
  EXPECT_NE(e.find("prune.atention"), std::string::npos) << e;
  EXPECT_NE(error_for(good, "fast").find("no such profile (its profiles: quick)"),
            std::string::npos);
  s = good;
  s.replace(s.find("legs: [5, 10]"), 13, "legs: [10, 5]");
  EXPECT_NE(
      error_for(s).find("scratch: legs: the legs' step counts must be positive and increasing"),
      std::string::npos);
  fs::remove(ckpt / "model.pt");
  EXPECT_NE(error_for(good).find("has no model.pt"), std::string::npos);
  EXPECT_NE(error_for(experiment_text(base, "{configs: [" + base.string() + "], legs: [4]}") +
                      "goals: [{kind: best}]\n")
                .find("kind 'best'"),
            std::string::npos);
}

double first_bleu(const fs::path& eval_json) {
  return json::parse(io::read_file(eval_json))["scores"]["ref1"]["bleu"].get<double>();
}

// The whole chain on the tiny corpus: baseline in two legs, a control and a lambda, a target count
// against Michel et al., one architecture from scratch in two legs, two seeds, then resumed.
TEST(Reproduce, TinyExperimentEndToEndWithTwoSeedsThenResumed) {
  TempDir dir;
  const auto base = tiny_base(dir);
  io::write_file_atomic(dir / "e.yaml", fmt::format(R"(baseline: {{configs: [{0}], legs: [20, 40]}}
prune: {{configs: [{0}], set: {{train.max_steps: 10, train.eval_every: 10, train.warmup_steps: 2}}}}
series: [{{name: all, lambdas: [0.5]}}]
scratch: {{configs: [{0}], legs: [10, 20], runs: [all-l0.5]}}
targets: {{set: {{prune.target_warmup_steps: 5}},
          runs: [{{heads: 3, set: {{prune.recovery_steps: 4, prune.rewind: true}}}}]}}
evaluate: {{splits: [dev, test], beam: 1}}
seeds: 2
goals:
  - {{kind: control_gain, max: 100, text: the control}}
  - {{kind: scratch_within, within: 1000}}
)",
                                                    base.string()));
  const auto e = sweep::load_experiment(dir / "e.yaml");
  sweep::ReproduceOptions o;
  o.out = dir / "out";
  o.executable = HEADCOUNT_BINARY;
  o.workers = 2;
  o.cores = 2;
  const auto r = sweep::run_reproduce(e, o);
  ASSERT_EQ(r.failed, 0) << (r.failed_ids.empty() ? "" : r.failed_ids[0]);
  const size_t pieces = sweep::make_plan(e, o.out, 1).steps.size();
  EXPECT_EQ(static_cast<size_t>(r.done), pieces);

  // The baseline's second leg and the scratch run's went on from the first's checkpoint.
  const auto step_of = [](const fs::path& run) {
    return json::parse(io::read_file(run / "checkpoints" / "last" / "state.json"))["step"];
  };
  EXPECT_EQ(step_of(o.out / "baseline"), 40);
  EXPECT_EQ(step_of(o.out / "seed-2" / "all-l0.5" / "scratch"), 20);
  // The target run rewound its weights for its last 4 steps: Michel's heads get those 4 steps of
  // fine-tuning (the run's config with its recovery settings turned off), not its 10.
  EXPECT_EQ(step_of(o.out / "seed-1" / "target-3"), 10);
  EXPECT_EQ(step_of(o.out / "seed-1" / "target-3" / "compare-ft" / "michel-finetuned"), 4);
  // Each seed's runs ran with its seed, and recorded where they ran.
  const auto summary = json::parse(io::read_file(o.out / "seed-2" / "all-l0" / "summary.json"));
  EXPECT_FALSE(summary["provenance"]["commit"].get<std::string>().empty());
  EXPECT_FALSE(summary["provenance"]["libtorch"].get<std::string>().empty());
  const auto ev = json::parse(io::read_file(o.out / "seed-2" / "all-l0" / "eval-dev.json"));
  EXPECT_EQ(ev["provenance"], summary["provenance"]);  // the evaluations record it too
  EXPECT_NE(io::read_file(o.out / "seed-2" / "all-l0" / "config.yaml").find("seed: 2"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(o.out / "seed-1" / "results.md"));  // each seed's report

  // results.json against the evaluations read here: the mean over the seeds, and the change as
  // the mean of the same-seed differences.
  const auto n = json::parse(io::read_file(o.out / "results.json"));
  for (const std::string split : {"dev", "test"}) {
    const auto f = "eval-" + split + ".json";
    const double a1 = first_bleu(o.out / "seed-1" / "all-l0.5" / f);
    const double a2 = first_bleu(o.out / "seed-2" / "all-l0.5" / f);
    const double c1 = first_bleu(o.out / "seed-1" / "all-l0" / f);
    const double c2 = first_bleu(o.out / "seed-2" / "all-l0" / f);
    EXPECT_NEAR(n["all-l0.5"][split]["mean"].get<double>(), (a1 + a2) / 2, 1e-9);
    EXPECT_NEAR(n["all-l0.5"][split]["sd"].get<double>(), std::fabs(a1 - a2) / std::sqrt(2.0),
                1e-9);
    EXPECT_NEAR(n["all-l0.5"][split + "_change"]["mean"].get<double>(), ((a1 - c1) + (a2 - c2)) / 2,
                1e-9);
    const double m1 = first_bleu(o.out / "seed-1" / "target-3" / "compare-ft" /
                                 ("eval-michel-finetuned-" + split + ".json"));
    const double m2 = first_bleu(o.out / "seed-2" / "target-3" / "compare-ft" /
                                 ("eval-michel-finetuned-" + split + ".json"));
    EXPECT_NEAR(n["target-3 Michel+FT"][split]["mean"].get<double>(), (m1 + m2) / 2, 1e-9);
  }
  const std::string md = io::read_file(o.out / "results.md");
  EXPECT_NE(md.find("| the control | all-l0: dev"), std::string::npos) << md;
  EXPECT_NE(md.find("all-l0.5/scratch"), std::string::npos);
  EXPECT_NE(md.find("## Where the evaluations ran"), std::string::npos);

  // Again: everything is done, nothing runs.
  const auto again = sweep::run_reproduce(e, o);
  EXPECT_EQ(again.done, 0);
  EXPECT_EQ(static_cast<size_t>(again.skipped), pieces);

  // A run's marker deleted: it resumes its own (finished) folder, and what depends on it runs
  // again; the from-scratch run built on it starts afresh, its old folder set aside, not resumed.
  const fs::path run = o.out / "seed-2" / "all-l0.5";
  fs::remove(o.out / "steps" / "seed-2~all-l0.5~prune.json");
  // An earlier invocation's set-aside folders of the coming seconds, holding the same path: this
  // one's go to STAMP-2 beside them.
  const std::time_t now = std::time(nullptr);
  for (int k = 0; k < 60; ++k) {
    std::string t = sweep::utc_clock(now + k);
    t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '-' || c == ':'; }),
            t.end());
    std::replace(t.begin(), t.end(), ' ', 'T');
    fs::create_directories(o.out / "stale" / (t + "Z") / "seed-2" / "all-l0.5" / "scratch" / "x");
  }
  const auto redo = sweep::run_reproduce(e, o);
  ASSERT_EQ(redo.failed, 0);
  EXPECT_EQ(redo.done, 8);  // the run, 2 evaluations, 2 scratch legs, 2 evaluations, the report
  EXPECT_EQ(static_cast<size_t>(redo.skipped), pieces - 8);
  std::vector<fs::path> stale;
  for (const auto& d : fs::directory_iterator(o.out / "stale"))
    if (d.path().filename().string().find("Z-2") != std::string::npos) stale.push_back(d.path());
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_TRUE(fs::exists(stale[0] / "seed-2" / "all-l0.5" / "scratch" / "checkpoints" / "last"));
  EXPECT_TRUE(fs::exists(stale[0] / "steps" / "seed-2~all-l0.5~scratch~leg-10.json"));
  EXPECT_TRUE(fs::exists(stale[0] / "steps" / "seed-2~report.json"));
  EXPECT_EQ(step_of(run / "scratch"), 20);
  const std::string log = io::read_file(run / "scratch" / "log.txt");
  size_t starts = 0;
  for (size_t at = 0; (at = log.find("scratch/leg-10 started", at)) != std::string::npos; ++at)
    ++starts;
  EXPECT_EQ(starts, 1u) << log;  // a fresh folder: its first leg started once, not resumed
  EXPECT_FALSE(fs::exists(stale[0] / "seed-2" / "all-l0.5" / "checkpoints"));  // the run stays

  // Another budget into the same folder: an error naming a piece, not a mixed table.
  auto other = e;
  other.prune_set.emplace_back("train.max_steps", "12");
  const auto err = error_of([&] { sweep::run_reproduce(other, o); });
  EXPECT_NE(err.find("holds pieces of another experiment: seed-1/all-l0/prune ran as"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace headcount
