// Sweeps (expansion, naming, resume and skip, failure isolation, the Slurm script) and the report.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/dist/distributed.h"
#include "headcount/sweep/report.h"
#include "headcount/sweep/sweep.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::error_of;
using testing::TempDir;
namespace fs = std::filesystem;

// A base config file for sweeps over the tiny corpus.
fs::path tiny_base(const TempDir& dir, int steps) {
  Config c = tiny_run_config(dir, 64);
  c.train.max_steps = steps;
  c.train.eval_every = steps;
  c.train.log_every = steps;
  save_config(c, dir / "base.yaml");
  return dir / "base.yaml";
}

fs::path write_sweep(const TempDir& dir, const std::string& name, const std::string& text) {
  io::write_file_atomic(dir / name, text);
  return dir / name;
}

TEST(Sweep, GridThenRunsInFileOrderWithReadableNames) {
  TempDir dir;
  const auto base = tiny_base(dir, 10);
  const auto file = write_sweep(dir, "s.yaml",
                                fmt::format(R"(command: train
configs: [{}]
set: {{train.max_steps: 5}}
grid:
  seed: [1, 2]
  prune.attention: [[enc_self], [enc_self, enc_dec]]
runs:
  - {{train.lr: 0.001}}
  - {{train.lr: 0.002, name: fast}}
)",
                                            base.string()));
  const auto spec = sweep::load_sweep(file);
  ASSERT_EQ(spec.points.size(), 6u);
  EXPECT_EQ(spec.points[0].name, "seed-1_attention-enc_self");
  EXPECT_EQ(spec.points[1].name, "seed-1_attention-enc_self+enc_dec");
  EXPECT_EQ(spec.points[2].name, "seed-2_attention-enc_self");
  EXPECT_EQ(spec.points[3].name, "seed-2_attention-enc_self+enc_dec");
  EXPECT_EQ(spec.points[4].name, "lr-0.001");
  EXPECT_EQ(spec.points[5].name, "fast");
  EXPECT_EQ(spec.axes, (std::vector<std::string>{"seed", "prune.attention", "train.lr"}));
  // Each point's config: the base, then `set`, then its values.
  const Config c = sweep::resolve_point(spec, spec.points[1]);
  EXPECT_EQ(c.seed, 1);
  EXPECT_EQ(c.prune.attention, (std::vector<std::string>{"enc_self", "enc_dec"}));
  EXPECT_EQ(c.train.max_steps, 5);
  EXPECT_DOUBLE_EQ(sweep::resolve_point(spec, spec.points[5]).train.lr, 0.002);
  // The job: the values as --set, threads split, the run folder.
  const auto job = sweep::point_job(spec, 1, dir / "out", 1);
  const std::vector<std::string> want = {
      "train", base.string(),
      "--set", "train.max_steps=5",
      "--set", "seed=1",
      "--set", "prune.attention=[enc_self, enc_dec]",
      "--set", "threads.intra_op=-1",
      "--set", "threads.blas=1",
      "--out", (dir / "out" / "seed-1_attention-enc_self+enc_dec").string()};
  EXPECT_EQ(job.args, want);
}

TEST(Sweep, ShortNamesCollideSoFullKeysAreUsed) {
  const sweep::Assignments v = {{"train.max_tokens", "100"}, {"data.max_tokens", "50"}};
  EXPECT_EQ(sweep::point_name(v, {"train.max_tokens", "data.max_tokens"}),
            "train.max_tokens-100_data.max_tokens-50");
  EXPECT_EQ(sweep::point_name({{"prune.attention", "[]"}}, {"prune.attention"}), "attention-none");
}

TEST(Sweep, AnotherSweepFileOnAFolderWithItsRunsIsRefused) {
  TempDir dir;
  const auto base = tiny_base(dir, 10);
  const std::string head = fmt::format("command: train\nconfigs: [{}]\n", base.string());
  const auto run_dry = [&](const std::string& text, const std::string& name) {
    sweep::SweepOptions o;
    o.out = dir / "out";
    o.executable = HEADCOUNT_BINARY;
    o.dry_run = true;
    return testing::error_of(
        [&] { sweep::run_sweep(sweep::load_sweep(write_sweep(dir, name, text)), o); });
  };
  const std::string first = head + "grid: {seed: [1, 2]}\n";
  EXPECT_EQ(run_dry(first, "a.yaml"), "(no error)");
  fs::create_directories(dir / "out" / "seed-1");     // a run started
  EXPECT_EQ(run_dry(first, "a.yaml"), "(no error)");  // the same sweep continues
  EXPECT_EQ(run_dry(head + "grid: {seed: [1, 2, 3]}\n", "b.yaml"), "(no error)");  // one more run
  // A budget or a schedule may change, as it may for a resumed run; the model may not.
  EXPECT_EQ(run_dry(head + "set: {train.lr: 0.001}\ngrid: {seed: [1, 2]}\n", "c.yaml"),
            "(no error)");
  const std::string e =
      run_dry(head + "set: {model.dropout: 0.2}\ngrid: {seed: [1, 2]}\n", "e.yaml");
  EXPECT_NE(e.find("holds the runs of another sweep (set: model.dropout differ"), std::string::npos)
      << e;
  const std::string f =
      run_dry(fmt::format("command: train\nconfigs: [{}, {}]\ngrid: {{seed: [1]}}\n", base.string(),
                          base.string()),
              "d.yaml");
  EXPECT_NE(f.find("configs"), std::string::npos) << f;
  // A sweep.json whose run name leads out of the sweep folder: the report (which writes into each
  // run) refuses it.
  auto j = nlohmann::json::parse(io::read_file(dir / "out" / "sweep.json"));
  j["points"][0]["name"] = "../elsewhere";
  io::write_file_atomic(dir / "out" / "sweep.json", j.dump());
  sweep::ReportOptions ro;
  ro.dir = dir / "out";
  ro.plots = false;
  const std::string r = testing::error_of([&] { sweep::write_report(ro); });
  EXPECT_NE(r.find("a point's name is \"../elsewhere\""), std::string::npos) << r;
}

TEST(Sweep, BadSweepFilesNameTheLineAndTheProblem) {
  TempDir dir;
  const auto base = tiny_base(dir, 10);
  auto err = [&](const std::string& text) {
    return error_of([&] { sweep::load_sweep(write_sweep(dir, "bad.yaml", text)); });
  };
  const std::string cfg = fmt::format("configs: [{}]\n", base.string());
  EXPECT_NE(err("command: train\n" + cfg + "grid:\n  train.lrr: [1]\n")
                .find("bad.yaml:4: run 'lrr-1': --set train.lrr=1: unknown key 'train.lrr'; did "
                      "you mean 'train.lr'?"),
            std::string::npos);
  const std::pair<std::string, std::string> cases[] = {
      {"command: train\n" + cfg + "grid:\n  train.lr: fast\n", "bad.yaml:4"},
      {"command: train\n" + cfg + "grid:\n  train.lr: [abc]\n", "train.lr"},
      {"command: train\n" + cfg, "no runs"},
      {"command: fit\n" + cfg + "grid: {seed: [1]}\n", "expected train or prune"},
      {"command: train\nconfigs: [nope.yaml]\ngrid: {seed: [1]}\n", "nope.yaml"},
      {"command: train\n" + cfg + "grid: {seed: [1]}\nworkers: 2\n", "unknown sweep key 'workers'"},
      {"command: train\n" + cfg + "runs: [{seed: 1}, {seed: 1}]\n", "two runs are named 'seed-1'"},
      {"command: prune\n" + cfg + "grid: {prune.lambda: [0.1]}\n", "prune.init_from is empty"},
      {"command: train\n" + cfg + "grid: {seed: [1]}\nretrain: {configs: [x]}\n",
       "only a prune sweep"},
      {"command: train\n" + cfg + "grid: {seed: [1]}\nslurm: {gpus: 2}\n",
       "slurm: unknown key 'gpus'"},
      {"command: train\n" + cfg + "grid: {seed: [1]\n", "not valid YAML"},
      // Five lists of ten: 100000 runs, refused before one is expanded.
      {"command: train\n" + cfg +
           "grid:\n  seed: [1,2,3,4,5,6,7,8,9,10]\n  train.lr: [1,2,3,4,5,6,7,8,9,10]\n"
           "  train.warmup_steps: [1,2,3,4,5,6,7,8,9,10]\n  train.max_steps: "
           "[1,2,3,4,5,6,7,8,9,10]\n  train.patience: [1,2,3,4,5,6,7,8,9,10]\n",
       "grid: more than 10000 runs (the product of the lists' lengths, up to train.patience)"},
  };
  for (const auto& [text, want] : cases) {
    const std::string e = err(text);
    EXPECT_NE(e.find(want), std::string::npos) << text << "\n-> " << e;
  }
}

// Zero-pruning controls: each run's control is the one that agrees with it on every axis but the
// pruning strength (a key a run does not set is unset), unless the run names it.
TEST(Sweep, ControlsMatchEveryAxisButThePruningStrength) {
  TempDir dir;
  const auto base = tiny_base(dir, 10);
  const auto file = write_sweep(dir, "s.yaml",
                                fmt::format(R"(command: prune
configs: [{}]
set: {{prune.init_from: runs/x/checkpoints/best}}
runs:
  - {{name: all-l0, prune.lambda: 0, control: true}}
  - {{name: all-l0.1, prune.lambda: 0.1}}
  - {{name: enc-l0, prune.lambda: 0, prune.attention: [enc_self], prune.train_parts: [encoder],
     control: true}}
  - {{name: enc-l0.05, prune.lambda: 0.05, prune.attention: [enc_self],
     prune.train_parts: [encoder]}}
  - {{name: enc-dec, prune.lambda: 0.05, prune.attention: [enc_self, dec_self]}}
  - {{name: all-t4, prune.target_heads: 4, prune.lagrangian_lr: 0.1, control: false}}
  - {{name: seed-2, seed: 2, prune.lambda: 0.1}}
  - {{name: all-enc, prune.lambda: 0.3, control: enc-l0}}
)",
                                            base.string()));
  const auto spec = sweep::load_sweep(file);
  ASSERT_EQ(spec.points.size(), 8u);
  std::map<std::string, std::pair<bool, std::string>> got;
  for (const auto& p : spec.points) got[p.name] = {p.is_control, p.control};
  const std::map<std::string, std::pair<bool, std::string>>
      want = {{"all-l0", {true, ""}},        {"all-l0.1", {false, "all-l0"}},
              {"enc-l0", {true, ""}},        {"enc-l0.05", {false, "enc-l0"}},
              {"enc-dec", {false, ""}},         // prune.attention differs from both controls'
              {"all-t4", {false, "all-l0"}},    // pruning-strength keys alone
              {"seed-2", {false, ""}},          // seed is set here, unset in all-l0
              {"all-enc", {false, "enc-l0"}}};  // named: matching is not asked
  EXPECT_EQ(got, want);
  // `control` is not a config key: it is neither an axis nor a --set.
  EXPECT_EQ(std::find(spec.axes.begin(), spec.axes.end(), "control"), spec.axes.end());
  for (const auto& a : sweep::point_job(spec, 0, dir / "out", 0).args)
    EXPECT_EQ(a.find("control"), std::string::npos) << a;

  // sweep.json carries them for the report.
  sweep::SweepOptions o;
  o.out = dir / "out";
  o.executable = HEADCOUNT_BINARY;
  o.dry_run = true;
  sweep::run_sweep(spec, o);
  const auto j = nlohmann::json::parse(io::read_file(o.out / "sweep.json"));
  ASSERT_EQ(j["points"].size(), 8u);
  EXPECT_EQ(j["points"][0]["is_control"], true);
  EXPECT_EQ(j["points"][0]["control"], "");
  EXPECT_EQ(j["points"][3]["name"], "enc-l0.05");
  EXPECT_EQ(j["points"][3]["is_control"], false);
  EXPECT_EQ(j["points"][3]["control"], "enc-l0");

  // A grid's point named in `controls:`.
  const auto grid = sweep::load_sweep(write_sweep(dir, "g.yaml",
                                                  fmt::format(R"(command: prune
configs: [{}]
set: {{prune.init_from: runs/x/checkpoints/best}}
grid:
  prune.lambda: [0, 0.05, 0.2]
controls: [lambda-0]
)",
                                                              base.string())));
  ASSERT_EQ(grid.points.size(), 3u);
  EXPECT_TRUE(grid.points[0].is_control);
  EXPECT_EQ(grid.points[0].name, "lambda-0");
  EXPECT_EQ(grid.points[1].control, "lambda-0");
  EXPECT_EQ(grid.points[2].control, "lambda-0");
  EXPECT_FALSE(grid.points[2].is_control);
}

TEST(Sweep, BadControlsNameTheLineAndTheCandidates) {
  TempDir dir;
  const auto base = tiny_base(dir, 10);
  auto err = [&](const std::string& text) {
    return error_of([&] { sweep::load_sweep(write_sweep(dir, "bad.yaml", text)); });
  };
  const std::string head = fmt::format(
      "command: prune\nconfigs: [{}]\nset: {{prune.init_from: runs/x/checkpoints/best}}\n",
      base.string());
  // Two controls that differ only in pruning strength: which one is a run's is ambiguous.
  EXPECT_NE(
      err(head + "runs:\n"
                 "  - {name: c1, prune.lambda: 0, control: true}\n"
                 "  - {name: c2, prune.lambda: 0, prune.lambda_schedule: linear, control: true}\n"
                 "  - {name: p, prune.lambda: 0.1}\n")
          .find("bad.yaml:7: run 'p' matches several controls (c1, c2): they agree with it "
                "on every axis but the pruning strength; name its control with 'control: "
                "NAME'"),
      std::string::npos);
  const std::pair<std::string, std::string> cases[] = {
      {head + "grid: {prune.lambda: [0, 0.1]}\ncontrols: [lambda-0.0]\n",
       "bad.yaml:5: controls: the sweep has no run named 'lambda-0.0' (its runs: lambda-0, "
       "lambda-0.1)"},
      {head + "runs:\n  - {name: c, prune.lambda: 0, control: true}\n"
              "  - {name: p, prune.lambda: 0.1, control: nope}\n",
       "bad.yaml:6: run 'p': control: the sweep has no run named 'nope' (its controls: c)"},
      {head +
           "runs:\n  - {name: a, prune.lambda: 0}\n  - {name: p, prune.lambda: 0.1, control: a}\n",
       "bad.yaml:6: run 'p': control: 'a' is not a control"},
      {head + "runs:\n  - {name: c, prune.lambda: 0, control: true}\n"
              "  - {name: d, prune.lambda: 0, control: c}\n"
              "controls: [d]\n",
       "bad.yaml:6: run 'd' is a control and names 'c' as its control: a control has no control "
       "of its own"},
      {fmt::format("command: train\nconfigs: [{}]\ngrid: {{seed: [1, 2]}}\ncontrols: [seed-1]\n",
                   base.string()),
       "bad.yaml:4: controls: only a prune sweep has zero-pruning controls"},
      {fmt::format("command: train\nconfigs: [{}]\nruns: [{{seed: 1, control: true}}]\n",
                   base.string()),
       "bad.yaml:3: control: only a prune sweep"},
      {head + "runs: [{prune.lambda: 0, control: [a]}]\n", "bad.yaml:4: control: expected true"},
  };
  for (const auto& [text, want] : cases) {
    const std::string e = err(text);
    EXPECT_NE(e.find(want), std::string::npos) << text << "\n-> " << e;
  }
  // A control that prunes is allowed, with a warning.
  ::testing::internal::CaptureStderr();
  const auto spec = sweep::load_sweep(write_sweep(
      dir, "warn.yaml", head + "runs:\n  - {name: c, prune.lambda: 0.01, control: true}\n"));
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(spec.points[0].is_control);
  EXPECT_NE(warned.find("warn.yaml:5: run 'c' is a control but prunes (prune.lambda 0.01"),
            std::string::npos)
      << warned;
}

// Runs two tiny training points two at a time, one of which cannot start (its data folder does
// not exist): the other finishes; a second sweep skips it and retries the failed one.
TEST(Sweep, RunsInParallelIsolatesFailuresAndSkipsFinishedRuns) {
  TempDir dir;
  const auto base = tiny_base(dir, 20);
  const auto file = write_sweep(dir, "s.yaml",
                                fmt::format(R"(command: train
configs: [{}]
runs:
  - {{seed: 3}}
  - {{data.dir: {}, name: broken}}
)",
                                            base.string(), (dir / "missing").string()));
  const auto spec = sweep::load_sweep(file);
  sweep::SweepOptions o;
  o.out = dir / "out";
  o.executable = HEADCOUNT_BINARY;
  o.workers = 2;
  o.cores = 2;
  const auto r = sweep::run_sweep(spec, o);
  EXPECT_EQ(r.done, 1);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.failed_names, std::vector<std::string>{"broken"});
  EXPECT_EQ(sweep::run_state(o.out / "seed-3"), sweep::RunState::kDone);
  EXPECT_EQ(sweep::run_state(o.out / "broken"), sweep::RunState::kFailed);
  EXPECT_TRUE(sweep::run_bleu(o.out / "seed-3").has_value());
  // Its resolved config is in its folder, and the threads were split between the two workers.
  const Config saved = load_config_file(o.out / "seed-3" / "config.yaml");
  EXPECT_EQ(saved.seed, 3);
  EXPECT_EQ(saved.threads.blas, 1);
  EXPECT_TRUE(fs::exists(o.out / "sweep.json"));
  const auto table = sweep::status_table(spec, o.out);
  EXPECT_NE(table.find("broken"), std::string::npos);
  EXPECT_NE(table.find("failed"), std::string::npos);

  const auto mtime = fs::last_write_time(o.out / "seed-3" / "summary.json");
  const auto again = sweep::run_sweep(spec, o);
  EXPECT_EQ(again.skipped, 1);
  EXPECT_EQ(again.done, 0);
  EXPECT_EQ(again.failed, 1);  // retried, fails again
  EXPECT_EQ(fs::last_write_time(o.out / "seed-3" / "summary.json"), mtime);
}

// An interrupted run (a checkpoint, no summary) is resumed from its checkpoint, not restarted.
TEST(Sweep, InterruptedRunsResumeFromTheirCheckpoint) {
  TempDir dir;
  const auto base = tiny_base(dir, 40);
  const auto file = write_sweep(dir, "s.yaml",
                                fmt::format(R"(command: train
configs: [{}]
set: {{train.eval_every: 20}}
grid: {{seed: [5]}}
)",
                                            base.string()));
  const auto spec = sweep::load_sweep(file);
  const fs::path run = dir / "out" / "seed-5";
  // The first half, as if the sweep had been stopped at step 20.
  ASSERT_EQ(std::system(fmt::format("{} train {} --set seed=5 --set train.eval_every=20 --set "
                                    "train.max_steps=20 --out {} >/dev/null 2>&1",
                                    HEADCOUNT_BINARY, base.string(), run.string())
                            .c_str()),
            0);
  fs::remove(run / "summary.json");
  ASSERT_EQ(sweep::run_state(run), sweep::RunState::kInterrupted);
  sweep::SweepOptions o;
  o.out = dir / "out";
  o.executable = HEADCOUNT_BINARY;
  o.cores = 1;
  const auto r = sweep::run_sweep(spec, o);
  EXPECT_EQ(r.done, 1);
  const auto log = io::read_file(run / "log.txt");
  EXPECT_NE(log.find("resuming"), std::string::npos) << log;
  const auto summary = nlohmann::json::parse(io::read_file(run / "summary.json"));
  EXPECT_EQ(summary["steps"], 40);
}

TEST(Sweep, SlurmArrayScriptRunsOnePointPerTask) {
  TempDir dir;
  const auto base = tiny_base(dir, 10);
  const auto file = write_sweep(dir, "s.yaml",
                                fmt::format(R"(command: train
configs: [{}]
grid: {{seed: [1, 2, 3]}}
slurm: {{partition: cpu, cpus_per_task: 1, mem: 2G, time: "00:30:00", extra: ["--qos=short"]}}
)",
                                            base.string()));
  // The CLI writes the script and, with --submit, hands it to sbatch (a fake one here).
  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  io::write_file_atomic(bin / "sbatch", fmt::format("#!/bin/sh\necho \"$@\" > {}\necho "
                                                    "'Submitted batch job 42'\n",
                                                    (dir / "sbatch-args").string()));
  chmod((bin / "sbatch").c_str(), 0755);
  const fs::path out = dir / "out";
  const std::string cmd = fmt::format(
      "PATH={}:$PATH {} sweep {} --out {} --launcher slurm --submit > {} 2>&1", bin.string(),
      HEADCOUNT_BINARY, file.string(), out.string(), (dir / "cli.txt").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << io::read_file(dir / "cli.txt");
  const fs::path script = out / "sweep.sbatch";
  EXPECT_EQ(io::read_file(dir / "sbatch-args"), script.string() + "\n");
  EXPECT_NE(io::read_file(dir / "cli.txt").find("Submitted batch job 42"), std::string::npos);
  const std::string s = io::read_file(script);
  for (const char* line :
       {"#SBATCH --array=0-2\n", "#SBATCH --partition=cpu\n", "#SBATCH --cpus-per-task=1\n",
        "#SBATCH --mem=2G\n", "#SBATCH --time=00:30:00\n", "#SBATCH --qos=short\n"}) {
    EXPECT_NE(s.find(line), std::string::npos) << line << " not in\n" << s;
  }
  // Array task 1 runs the second point alone.
  const std::string task =
      fmt::format("SLURM_ARRAY_TASK_ID=1 SLURM_CPUS_PER_TASK=1 bash {} > {} 2>&1", script.string(),
                  (dir / "task.txt").string());
  ASSERT_EQ(std::system(task.c_str()), 0) << io::read_file(dir / "task.txt");
  EXPECT_EQ(sweep::run_state(out / "seed-2"), sweep::RunState::kDone);
  EXPECT_EQ(sweep::run_state(out / "seed-1"), sweep::RunState::kPending);
  EXPECT_EQ(sweep::run_state(out / "seed-3"), sweep::RunState::kPending);
  // Without sbatch on PATH, --submit is a clear error.
  const std::string no_sbatch =
      fmt::format("PATH=/nonexistent {} sweep {} --out {} --launcher slurm --submit 2>&1",
                  HEADCOUNT_BINARY, file.string(), out.string());
  FILE* p = popen(no_sbatch.c_str(), "r");
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) text += buf;
  EXPECT_NE(pclose(p), 0);
  EXPECT_NE(text.find("sbatch not found"), std::string::npos) << text;
}

// slurm.ntasks > 1: each array task starts its run as several data-parallel processes with srun
// (here a fake srun that starts them locally with Slurm's variables, and a fake scontrol).
TEST(Sweep, SlurmTasksRunEachPointAsSeveralProcesses) {
  TempDir dir;
  const auto base = tiny_base(dir, 8);
  const auto file = write_sweep(dir, "s.yaml",
                                fmt::format(R"(command: train
configs: [{}]
grid: {{seed: [1, 2]}}
slurm: {{cpus_per_task: 1, ntasks: 2}}
)",
                                            base.string()));
  const auto spec = sweep::load_sweep(file);
  sweep::SweepOptions o;
  o.out = dir / "out";
  o.executable = HEADCOUNT_BINARY;
  const auto script = sweep::write_slurm_script(spec, o);
  const std::string s = io::read_file(script);
  EXPECT_NE(s.find("#SBATCH --ntasks=2\n"), std::string::npos) << s;
  EXPECT_NE(s.find("export MASTER_ADDR="), std::string::npos) << s;
  EXPECT_NE(s.find("--srun-tasks 2"), std::string::npos) << s;

  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  io::write_file_atomic(bin / "srun", R"(#!/bin/sh
n=1
for a in "$@"; do
  case "$a" in
    --ntasks=*) n=${a#--ntasks=}; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
i=0; pids=""
while [ $i -lt $n ]; do
  SLURM_PROCID=$i SLURM_NTASKS=$n SLURM_LOCALID=$i "$@" &
  pids="$pids $!"; i=$((i + 1))
done
rc=0
for p in $pids; do wait $p || rc=$?; done
exit $rc
)");
  io::write_file_atomic(bin / "scontrol", "#!/bin/sh\necho 127.0.0.1\n");
  chmod((bin / "srun").c_str(), 0755);
  chmod((bin / "scontrol").c_str(), 0755);
  // MASTER_PORT = 20000 + job id % 20000 + task id: choose a job id that gives a free port.
  int port = 0;
  for (int i = 0; i < 200 && (port < 20001 || port >= 40000); ++i) port = dist::free_port();
  ASSERT_TRUE(port >= 20001 && port < 40000);
  const std::string task = fmt::format(
      "PATH={}:$PATH SLURM_JOB_NODELIST=node1 SLURM_ARRAY_JOB_ID={} SLURM_ARRAY_TASK_ID=1 "
      "SLURM_CPUS_PER_TASK=1 bash {} > {} 2>&1",
      bin.string(), port - 20000 - 1, script.string(), (dir / "task.txt").string());
  ASSERT_EQ(std::system(task.c_str()), 0) << io::read_file(dir / "task.txt");
  EXPECT_EQ(sweep::run_state(o.out / "seed-2"), sweep::RunState::kDone)
      << io::read_file(o.out / "seed-2" / "log.txt");
  const auto summary = nlohmann::json::parse(io::read_file(o.out / "seed-2" / "summary.json"));
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["parameters_identical_across_processes"], true);
  EXPECT_EQ(sweep::run_state(o.out / "seed-1"), sweep::RunState::kPending);
}

// A finished baseline training run: best dev BLEU 25.5 (chrF 45.5) of three evaluations.
void write_baseline(const fs::path& base) {
  fs::create_directories(base / "checkpoints" / "best");
  io::write_file_atomic(base / "metrics.jsonl",
                        R"({"event":"eval","step":100,"dev_bleu":20.0,"dev_chrf":40.0}
{"event":"eval","step":200,"dev_bleu":25.5,"dev_chrf":45.5}
{"event":"eval","step":300,"dev_bleu":25.0,"dev_chrf":45.0}
)");
  io::write_file_atomic(base / "summary.json", "{}");
  io::write_file_atomic(base / "checkpoints" / "best" / "architecture.json",
                        R"({"enc_self":[2,2],"dec_self":[2,2],"enc_dec":[2,2],"head_dim":8})");
}

// A finished prune run of a sweep folder with its summary, log and head-removal log.
void write_finished_prune(const fs::path& out, const std::string& name, const std::string& heads,
                          const std::string& e_d_de, double bleu, int64_t params) {
  const fs::path run = out / name;
  fs::create_directories(run);
  io::write_file_atomic(run / "summary.json", "{}");
  io::write_file_atomic(
      run / "pruning.json",
      fmt::format(R"({{"init_from":"base/checkpoints/best","attention_gated":["enc_self"],
                      "lambda":0.1,"target_heads":0,"steps":100,
                      "heads_before_e_d_de":"4/4/4","heads_after_e_d_de":"{}","heads_after":{},
                      "parameters_before":1000,"parameters_after":{},"dev_bleu_start":25.5,
                      "dev_bleu_end":{},"pruned_checkpoint":"{}"}})",
                  e_d_de, heads, params, bleu, (run / "pruned").string()));
  io::write_file_atomic(
      run / "metrics.jsonl",
      fmt::format(R"({{"event":"final","step":100,"dev_bleu":{},"dev_chrf":44.25}})"
                  "\n",
                  bleu));
  io::write_file_atomic(run / "head_removal.csv",
                        "attention,layer,head,removal_step,p_open,gate,dev_bleu_at_removal\n"
                        "enc_self,0,1,50,0.01,0,24.0\nenc_self,1,0,100,0.02,0,25.0\n"
                        "enc_self,0,0,,0.9,1,\nenc_self,1,1,,0.8,1,\n");
}

// A sweep folder's sweep.json for a prune sweep over `axes` against the baseline `base`.
void write_manifest(const fs::path& out, const std::vector<std::string>& axes, const fs::path& base,
                    bool retrain, const nlohmann::json& points) {
  const nlohmann::json manifest = {{"command", "prune"},
                                   {"axes", axes},
                                   {"baseline", base.string()},
                                   {"retrain", retrain},
                                   {"points", points}};
  fs::create_directories(out);
  io::write_file_atomic(out / "sweep.json", manifest.dump());
}

// A point of sweep.json; `control` / `is_control` left out for a sweep that predates controls.
nlohmann::json manifest_point(const std::string& name, const nlohmann::json& values,
                              std::optional<bool> is_control = {},
                              const std::string& control = "") {
  nlohmann::json p = {{"name", name}, {"values", values}};
  if (is_control) {
    p["is_control"] = *is_control;
    p["control"] = control;
  }
  return p;
}

// The report on a hand-made sweep folder: a baseline, a finished prune run with its retraining,
// a finished one without, and a pending one. Its sweep.json predates controls (no is_control or
// control per point): no run has a control.
TEST(Report, TableFromAFixtureOfFinishedRuns) {
  TempDir dir;
  const fs::path out = dir / "sweep";
  const fs::path base = dir / "base";
  write_baseline(base);
  write_manifest(out, {"prune.lambda"}, base, true,
                 {manifest_point("lambda-0.1", {{"prune.lambda", "0.1"}}),
                  manifest_point("lambda-0.5", {{"prune.lambda", "0.5"}}),
                  manifest_point("lambda-1", {{"prune.lambda", "1"}})});
  write_finished_prune(out, "lambda-0.1",
                       R"({"enc_self":[1,1],"dec_self":[2,2],"enc_dec":[2,1],"head_dim":8})",
                       "2/4/3", 25.0, 900);
  write_finished_prune(out, "lambda-0.5",
                       R"({"enc_self":[0,1],"dec_self":[1,0],"enc_dec":[1,1],"head_dim":8})",
                       "1/1/2", 21.25, 800);
  // lambda-0.1 was retrained from scratch (best dev BLEU 23.5); lambda-0.5's retraining runs.
  fs::create_directories(out / "lambda-0.1" / "scratch");
  io::write_file_atomic(out / "lambda-0.1" / "scratch" / "summary.json", "{}");
  io::write_file_atomic(out / "lambda-0.1" / "scratch" / "metrics.jsonl",
                        R"({"event":"eval","step":10,"dev_bleu":23.5,"dev_chrf":43.0}
{"event":"eval","step":20,"dev_bleu":22.0,"dev_chrf":42.0}
)");

  sweep::ReportOptions o;
  o.dir = out;
  const auto r = sweep::write_report(o);
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[0].name, "baseline");
  EXPECT_DOUBLE_EQ(*r.rows[0].bleu, 25.5);  // the best eval, and its chrF
  EXPECT_DOUBLE_EQ(*r.rows[0].chrf, 45.5);
  EXPECT_EQ(*r.rows[0].heads, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(*r.rows[0].parameters, 1000);
  EXPECT_EQ(*r.rows[1].heads, (std::vector<int64_t>{2, 4, 3}));
  EXPECT_DOUBLE_EQ(*r.rows[1].delta, -0.5);
  EXPECT_DOUBLE_EQ(*r.rows[1].bleu_scratch, 23.5);
  EXPECT_DOUBLE_EQ(*r.rows[1].chrf, 44.25);
  EXPECT_DOUBLE_EQ(*r.rows[2].delta, 21.25 - 25.5);
  EXPECT_FALSE(r.rows[2].bleu_scratch.has_value());
  EXPECT_EQ(r.rows[2].scratch_state, "pending");
  EXPECT_EQ(r.rows[3].state, "pending");
  EXPECT_FALSE(r.rows[3].bleu.has_value());

  const auto csv = io::read_lines(out / "results.csv");
  ASSERT_EQ(csv.size(), 5u);
  EXPECT_EQ(csv[0],
            "run,state,prune.lambda,heads_e_d_de,heads_total,parameters,bleu,bleu_scratch,"
            "scratch_state,chrf,bleu_change,control,bleu_change_control,sentences_per_s,"
            "bleu_scratch_change");
  EXPECT_EQ(csv[1], "baseline,done,,4/4/4,12,1000,25.50,,,45.50,,,,,");
  // From scratch against from trained: 23.5 - 25.0.
  EXPECT_EQ(csv[2], "lambda-0.1,done,0.1,2/4/3,9,900,25.00,23.50,done,44.25,-0.50,,,,-1.50");
  EXPECT_EQ(csv[4], "lambda-1,pending,1,,,,,,pending,,,,,,");
  const auto md = io::read_file(out / "results.md");
  EXPECT_NE(md.find("| lambda-1 (pending) | 1 | (pending) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| lambda-0.5 | 0.5 | 1/1/2 | 4 | 800 | 21.25 | (pending) | 44.25 | -4.25 | - "
                    "| - | - |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| lambda-0.1 | 0.1 | 2/4/3 | 9 | 900 | 25.00 | 23.50 | 44.25 | -0.50 | - | "
                    "-1.50 | - |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| chrF | vs baseline | vs control | scratch vs trained | sent/s |\n"),
            std::string::npos)
      << md;
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    EXPECT_TRUE(fs::exists(out / "plots" / "bleu_vs_heads.png"));
    EXPECT_TRUE(fs::exists(out / "plots" / "removal_lambda-0.1.png"));
    EXPECT_GT(fs::file_size(out / "plots" / "bleu_vs_heads.png"), 1000u);
  }
  // Not a sweep folder: a clear error.
  o.dir = dir / "nothing";
  EXPECT_NE(error_of([&] { sweep::write_report(o); }).find("no sweep.json"), std::string::npos);
}

// Controls in the report: each run against its zero-pruning control, in the table, the csv and the
// plot.
TEST(Report, EachRunAgainstItsZeroPruningControl) {
  TempDir dir;
  const fs::path out = dir / "sweep";
  const fs::path base = dir / "base";
  write_baseline(base);  // dev BLEU 25.5
  auto point = [](const std::string& name, const std::string& lambda, const std::string& attention,
                  bool is_control, const std::string& control) {
    nlohmann::json values = {{"prune.lambda", lambda}};
    if (!attention.empty()) values["prune.attention"] = attention;
    return manifest_point(name, values, is_control, control);
  };
  write_manifest(out, {"prune.lambda", "prune.attention"}, base, false,
                 {point("all-l0", "0", "", true, ""), point("all-l0.1", "0.1", "", false, "all-l0"),
                  point("enc-l0", "0", "[enc_self]", true, ""),
                  point("enc-l0.1", "0.1", "[enc_self]", false, "enc-l0"),
                  point("lambda-0.5", "0.5", "", false, "")});
  const std::string all = R"({"enc_self":[2,2],"dec_self":[2,2],"enc_dec":[2,2],"head_dim":8})";
  write_finished_prune(out, "all-l0", all, "4/4/4", 26.0, 1000);
  write_finished_prune(out, "all-l0.1",
                       R"({"enc_self":[1,1],"dec_self":[2,2],"enc_dec":[2,1],"head_dim":8})",
                       "2/4/3", 25.0, 900);
  // enc-l0 has not run: enc-l0.1 has no control BLEU to compare with.
  write_finished_prune(out, "enc-l0.1",
                       R"({"enc_self":[1,1],"dec_self":[2,2],"enc_dec":[2,2],"head_dim":8})",
                       "2/4/4", 24.75, 950);
  write_finished_prune(out, "lambda-0.5",
                       R"({"enc_self":[0,1],"dec_self":[1,0],"enc_dec":[1,1],"head_dim":8})",
                       "1/1/2", 21.25, 800);

  sweep::ReportOptions o;
  o.dir = out;
  const auto r = sweep::write_report(o);
  ASSERT_EQ(r.rows.size(), 6u);
  EXPECT_FALSE(r.rows[0].delta_control.has_value());  // the baseline
  EXPECT_TRUE(r.rows[1].is_control);
  EXPECT_FALSE(r.rows[1].delta_control.has_value());  // a control against itself: nothing
  EXPECT_DOUBLE_EQ(*r.rows[1].delta, 0.5);            // fine-tuning alone: +0.5 over the baseline
  EXPECT_EQ(r.rows[2].control, "all-l0");
  EXPECT_DOUBLE_EQ(*r.rows[2].delta, -0.5);
  EXPECT_DOUBLE_EQ(*r.rows[2].delta_control, -1.0);  // 25.0 - 26.0
  EXPECT_TRUE(r.rows[3].is_control);
  EXPECT_EQ(r.rows[3].state, "pending");
  EXPECT_EQ(r.rows[4].control, "enc-l0");
  EXPECT_FALSE(r.rows[4].delta_control.has_value());  // its control has not run
  EXPECT_EQ(r.rows[5].control, "");
  EXPECT_FALSE(r.rows[5].delta_control.has_value());

  const auto csv = io::read_lines(out / "results.csv");
  const std::vector<std::string> want_csv = {
      "run,state,prune.lambda,prune.attention,heads_e_d_de,heads_total,parameters,bleu,"
      "bleu_scratch,scratch_state,chrf,bleu_change,control,bleu_change_control,sentences_per_s",
      "baseline,done,,,4/4/4,12,1000,25.50,,,45.50,,,,",
      "all-l0,done,0,,4/4/4,12,1000,26.00,,,44.25,0.50,self,,",
      "all-l0.1,done,0.1,,2/4/3,9,900,25.00,,,44.25,-0.50,all-l0,-1.00,",
      "enc-l0,pending,0,[enc_self],,,,,,,,,self,,",
      "enc-l0.1,done,0.1,[enc_self],2/4/4,10,950,24.75,,,44.25,-0.75,enc-l0,,",
      "lambda-0.5,done,0.5,,1/1/2,4,800,21.25,,,44.25,-4.25,,,"};
  EXPECT_EQ(csv, want_csv);
  const auto md = io::read_file(out / "results.md");
  for (const char* want :
       {"vs control: BLEU minus that of the zero-pruning control of the run's setting (the "
        "baseline fine-tuned for the same steps with prune.lambda 0)",
        "| run | prune.lambda | prune.attention | heads e/d/d-e | total | parameters | BLEU | from "
        "scratch | chrF | vs baseline | vs control | sent/s |\n",
        "| all-l0 (control) | 0 | - | 4/4/4 | 12 | 1000 | 26.00 | - | 44.25 | +0.50 | - | - |\n",
        "| all-l0.1 | 0.1 | - | 2/4/3 | 9 | 900 | 25.00 | - | 44.25 | -0.50 | -1.00 | - |\n",
        "| enc-l0 (control, pending) | 0 | [enc_self] | (pending) |",
        "| enc-l0.1 | 0.1 | [enc_self] | 2/4/4 | 10 | 950 | 24.75 | - | 44.25 | -0.75 | - | - |\n"})
    EXPECT_NE(md.find(want), std::string::npos) << want << "\nnot in\n" << md;
  // The plot: the controls as their own series and as a line each, not among the pruned runs.
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    EXPECT_GT(fs::file_size(out / "plots" / "bleu_vs_heads.png"), 1000u);
    const auto dat = io::read_file(out / "plots" / "bleu_vs_heads.dat");
    EXPECT_NE(dat.find("12 NaN NaN \"4/4/4\" 26.00\n"), std::string::npos) << dat;
    EXPECT_NE(dat.find("9 25.00 NaN \"2/4/3\" NaN\n"), std::string::npos) << dat;
    const auto gp = io::read_file(out / "plots" / "bleu_vs_heads.gp");
    EXPECT_NE(gp.find("using 1:5 with points pt 9 ps 1.6 title 'zero-pruning control'"),
              std::string::npos)
        << gp;
    EXPECT_NE(gp.find("26.000 with lines dt 4 lw 1.5 title 'control all-l0 (26.00)'"),
              std::string::npos)
        << gp;
    EXPECT_EQ(gp.find("control enc-l0"), std::string::npos) << gp;  // no BLEU yet
  }
}

// Where write_eval_cache's evaluations say they ran.
const nlohmann::json kTestMachine = {{"commit", "abc1234"},
                                     {"cpu", "Test CPU"},
                                     {"cpu_flags", ""},
                                     {"gpu", ""},
                                     {"libtorch", "1.13.1"}};
constexpr const char* kTestDecodedOn = "commit abc1234, Test CPU, LibTorch 1.13.1, bf16";

// A checkpoint folder with a model.pt, and its `headcount eval` cache RUN/eval-SPLIT.json written
// after it (so the report takes it as fresh): BLEU and chrF against the first reference and, when
// given, against all references together.
void write_eval_cache(const fs::path& run, const fs::path& checkpoint, const std::string& split,
                      double bleu, double chrf, std::optional<double> bleu_all,
                      std::optional<double> chrf_all, double sentences_per_s) {
  fs::create_directories(checkpoint);
  if (!fs::exists(checkpoint / "model.pt")) io::write_file_atomic(checkpoint / "model.pt", "x");
  nlohmann::json j = {{"checkpoint", checkpoint.string()},
                      {"data", split},
                      {"sentences_per_s", sentences_per_s},
                      {"precision", "bf16"},
                      {"provenance", kTestMachine},
                      {"scores", {{"ref1", {{"bleu", bleu}, {"chrf", chrf}}}}}};
  if (bleu_all) {
    j["scores"]["ref2"] = {{"bleu", *bleu_all - 5}, {"chrf", *chrf_all - 5}};
    j["scores"]["all_refs"] = {{"bleu", *bleu_all}, {"chrf", *chrf_all}};
  }
  io::write_file_atomic(run / fmt::format("eval-{}.json", split), j.dump(2));
}

// What `headcount eval --hyp-out` adds to an evaluation cache written by write_eval_cache: the
// reference it scored against (ref_files) and the translations (RUN/eval-SPLIT.hyp.txt).
void write_translations(const fs::path& run, const std::string& split, const fs::path& ref_file,
                        const std::vector<std::string>& hyps) {
  const fs::path cache = run / fmt::format("eval-{}.json", split);
  auto j = nlohmann::json::parse(io::read_file(cache));
  j["ref_files"] = {ref_file.string()};
  io::write_file_atomic(cache, j.dump(2));
  io::write_lines_atomic(run / fmt::format("eval-{}.hyp.txt", split), hyps);
}

// A baseline and a sweep of two finished pruning runs: the control all-l0 (nothing removed) and
// all-l0.1 (3 of 12 heads removed), whose control it is.
void write_control_and_run(const fs::path& out, const fs::path& base) {
  write_baseline(base);
  write_manifest(out, {"prune.lambda"}, base, true,
                 {manifest_point("all-l0", {{"prune.lambda", "0"}}, true),
                  manifest_point("all-l0.1", {{"prune.lambda", "0.1"}}, false, "all-l0")});
  write_finished_prune(out, "all-l0",
                       R"({"enc_self":[2,2],"dec_self":[2,2],"enc_dec":[2,2],"head_dim":8})",
                       "4/4/4", 26.0, 1000);
  write_finished_prune(out, "all-l0.1",
                       R"({"enc_self":[1,1],"dec_self":[2,2],"enc_dec":[2,1],"head_dim":8})",
                       "2/4/3", 25.0, 900);
}

// Where a run's and its control's translations are recorded (eval-SPLIT.hyp.txt beside the eval
// cache, whose ref_files name the reference), "vs control" carries the paired bootstrap p-value.
TEST(Report, VsControlCarriesAPairedPValueWhereTranslationsAreRecorded) {
  TempDir dir;
  const fs::path out = dir / "sweep";
  const fs::path base = dir / "base";
  write_control_and_run(out, base);
  write_eval_cache(base, base / "checkpoints" / "best", "dev", 30.0, 50.0, {}, {}, 10.0);
  // 30 reference lines; the control translates them perfectly, the run keeps one word in two.
  std::vector<std::string> ref, poor;
  for (int i = 0; i < 30; ++i) {
    ref.push_back(fmt::format("and god said let there be light number {} and there was light", i));
    poor.push_back(fmt::format("and god said number {} there", i));
  }
  io::write_lines_atomic(dir / "dev.en", ref);
  for (const auto& [name, hyps, bleu] :
       {std::tuple{"all-l0", ref, 100.0}, std::tuple{"all-l0.1", poor, 20.0}}) {
    const fs::path run = out / name;
    write_eval_cache(run, run / "pruned", "dev", bleu, 50.0, {}, {}, 10.0);
    write_translations(run, "dev", dir / "dev.en", hyps);
  }
  sweep::ReportOptions o;
  o.dir = out;
  o.executable = "/bin/false";
  o.splits = {"dev"};
  o.plots = false;
  auto r = sweep::write_report(o);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(*r.rows[2].delta_control, 20.0 - 100.0);
  // No resample of a perfect control against the poor run comes near the observed gap.
  ASSERT_TRUE(r.rows[2].p_control.has_value());
  EXPECT_DOUBLE_EQ(*r.rows[2].p_control, 1.0 / 1001.0);
  EXPECT_FALSE(r.rows[1].p_control.has_value());  // the control itself
  EXPECT_NE(io::read_file(out / "results.md").find("| -80.00 (p 0.001) |"), std::string::npos)
      << io::read_file(out / "results.md");
  auto csv = io::read_lines(out / "results.csv");
  EXPECT_EQ(csv[0].substr(csv[0].size() - 10), ",p_control");  // no baseline translations
  EXPECT_EQ(csv[3].substr(csv[3].size() - 7), ",0.0010");
  EXPECT_FALSE(r.rows[2].p_baseline.has_value());

  // With the baseline's translations (perfect, as the control's), "vs baseline" carries one too:
  // the poor run against it p = 1/1001, the control (the same translations) p = 1.
  write_translations(base, "dev", dir / "dev.en", ref);
  r = sweep::write_report(o);
  ASSERT_TRUE(r.rows[2].p_baseline.has_value());
  EXPECT_DOUBLE_EQ(*r.rows[2].p_baseline, 1.0 / 1001.0);
  ASSERT_TRUE(r.rows[1].p_baseline.has_value());
  EXPECT_DOUBLE_EQ(*r.rows[1].p_baseline, 1.0);
  EXPECT_NE(io::read_file(out / "results.md").find("| -10.00 (p 0.001) | -80.00 (p 0.001) |"),
            std::string::npos)
      << io::read_file(out / "results.md");
  csv = io::read_lines(out / "results.csv");
  EXPECT_EQ(csv[0].substr(csv[0].size() - 21), ",p_control,p_baseline");
  EXPECT_EQ(csv[2].substr(csv[2].size() - 8), ",,1.0000");
  EXPECT_EQ(csv[3].substr(csv[3].size() - 14), ",0.0010,0.0010");
  fs::remove(base / "eval-dev.hyp.txt");

  // The same translations as the control: p = 1.
  io::write_lines_atomic(out / "all-l0.1" / "eval-dev.hyp.txt", ref);
  r = sweep::write_report(o);
  EXPECT_DOUBLE_EQ(*r.rows[2].p_control, 1.0);
  // Without the control's translations, the difference alone and no p column.
  fs::remove(out / "all-l0" / "eval-dev.hyp.txt");
  r = sweep::write_report(o);
  EXPECT_FALSE(r.rows[2].p_control.has_value());
  EXPECT_EQ(io::read_lines(out / "results.csv")[0].find("p_control"), std::string::npos);
  EXPECT_NE(io::read_file(out / "results.md").find("| -80.00 |"), std::string::npos);
}

// Speeds of different machines are not set side by side: with every row decoded on the same
// recorded machine the table has its sent/s column; with one row decoded elsewhere (or on an
// unrecorded one) it leaves it out, and says where each row was decoded.
TEST(Report, SpeedColumnOnlyWhenEveryRowWasDecodedOnOneMachine) {
  TempDir dir;
  const fs::path out = dir / "sweep";
  const fs::path base = dir / "base";
  write_control_and_run(out, base);
  write_eval_cache(base, base / "checkpoints" / "best", "dev", 30.0, 50.0, {}, {}, 10.0);
  for (const char* name : {"all-l0", "all-l0.1"})
    write_eval_cache(out / name, out / name / "pruned", "dev", 29.0, 50.0, {}, {}, 40.0);
  sweep::ReportOptions o;
  o.dir = out;
  o.executable = "/bin/false";
  o.splits = {"dev"};
  o.plots = false;
  sweep::write_report(o);
  std::string md = io::read_file(out / "results.md");
  EXPECT_NE(md.find("| vs control | sent/s |\n"), std::string::npos) << md;
  EXPECT_NE(md.find(fmt::format("- {}: baseline, all-l0, all-l0.1\n", kTestDecodedOn)),
            std::string::npos)
      << md;
  // all-l0.1 decoded on another machine.
  const fs::path cache = out / "all-l0.1" / "eval-dev.json";
  auto j = nlohmann::json::parse(io::read_file(cache));
  j["provenance"]["cpu"] = "Other CPU";
  io::write_file_atomic(cache, j.dump(2));
  sweep::write_report(o);
  md = io::read_file(out / "results.md");
  EXPECT_EQ(md.find("sent/s |"), std::string::npos) << md;
  EXPECT_NE(md.find("no speed column: the rows were decoded on different or unrecorded machines"),
            std::string::npos);
  EXPECT_NE(md.find("- commit abc1234, Other CPU, LibTorch 1.13.1, bf16: all-l0.1\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("mix the two"), std::string::npos);
  // The csv keeps the measured speeds.
  EXPECT_NE(io::read_lines(out / "results.csv")[3].find(",40.0"), std::string::npos);
}

// With several splits, the changes on the other splits (against the baseline and against the
// control) carry their paired p-values too, in the markdown cell and in p_<column> csv columns.
TEST(Report, ChangesOnOtherSplitsCarryPairedPValues) {
  TempDir dir;
  const fs::path out = dir / "sweep";
  const fs::path base = dir / "base";
  write_control_and_run(out, base);
  std::vector<std::string> ref, poor;
  for (int i = 0; i < 30; ++i) {
    ref.push_back(fmt::format("in the beginning god created the heaven number {} and earth", i));
    poor.push_back(fmt::format("in the beginning number {} earth", i));
  }
  io::write_lines_atomic(dir / "test.en", ref);
  // The baseline and the control translate the test split perfectly, the run poorly; no dev
  // translations anywhere (dev's changes have no p).
  const fs::path base_ckpt = base / "checkpoints" / "best";
  for (const auto& [folder, ckpt, hyps, test_bleu] :
       {std::tuple{base, base_ckpt, ref, 100.0},
        std::tuple{out / "all-l0", out / "all-l0" / "pruned", ref, 100.0},
        std::tuple{out / "all-l0.1", out / "all-l0.1" / "pruned", poor, 20.0}}) {
    write_eval_cache(folder, ckpt, "dev", 30.0, 50.0, {}, {}, 10.0);
    write_eval_cache(folder, ckpt, "test", test_bleu, 50.0, {}, {}, 10.0);
    write_translations(folder, "test", dir / "test.en", hyps);
  }
  sweep::ReportOptions o;
  o.dir = out;
  o.executable = "/bin/false";
  o.splits = {"test", "dev"};
  o.plots = false;
  auto r = sweep::write_report(o);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_FALSE(r.rows[2].p_control.has_value());  // dev, the primary split: no translations
  const std::string md = io::read_file(out / "results.md");
  // all-l0.1: test vs baseline and test vs control, -80 each, no resample comes near (p 1/1001);
  // the control against the baseline: the same translations, p = 1.
  EXPECT_NE(md.find("| -80.00 (p 0.001) | -80.00 (p 0.001) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| +0.00 (p 1.000) | - |"), std::string::npos) << md;
  EXPECT_NE(md.find("; p: the paired bootstrap p-value of a change"), std::string::npos) << md;
  const auto csv = io::read_lines(out / "results.csv");
  const auto header = text::split(csv[0], ',');
  ASSERT_GE(header.size(), 2u);
  EXPECT_EQ(header[header.size() - 2], "p_bleu_change_test");
  EXPECT_EQ(header.back(), "p_bleu_change_control_test");
  EXPECT_EQ(std::find(header.begin(), header.end(), "p_control"), header.end());
  const auto control = text::split(csv[2], ','), run = text::split(csv[3], ',');
  ASSERT_EQ(run.size(), header.size());
  EXPECT_EQ(run[run.size() - 2], "0.0010");
  EXPECT_EQ(run.back(), "0.0010");
  ASSERT_EQ(control.size(), header.size());
  EXPECT_EQ(control[control.size() - 2], "1.0000");
  EXPECT_EQ(control.back(), "");  // a control has no change against itself

  // Without the baseline's translations, only the change against the control has a p column.
  fs::remove(base / "eval-test.hyp.txt");
  r = sweep::write_report(o);
  const auto header2 = text::split(io::read_lines(out / "results.csv")[0], ',');
  EXPECT_EQ(header2.back(), "p_bleu_change_control_test");
  EXPECT_EQ(std::find(header2.begin(), header2.end(), "p_bleu_change_test"), header2.end());
  EXPECT_NE(io::read_file(out / "results.md").find("| -80.00 | -80.00 (p 0.001) |"),
            std::string::npos);
}

// `--split dev,test`: every checkpoint's dev BLEU and test BLEU against the first reference and
// against both (the test split has two), from the eval caches; the primary figures (BLEU, chrF,
// the change columns, sent/s, the plot) are those of the last split listed.
TEST(Report, DevAndTestAgainstEveryReferenceInOneTable) {
  TempDir dir;
  const fs::path out = dir / "sweep";
  const fs::path base = dir / "base";
  write_baseline(base);
  write_manifest(out, {"prune.lambda"}, base, true,
                 {manifest_point("all-l0", {{"prune.lambda", "0"}}, true),
                  manifest_point("all-l0.1", {{"prune.lambda", "0.1"}}, false, "all-l0"),
                  manifest_point("lambda-1", {{"prune.lambda", "1"}})});
  write_finished_prune(out, "all-l0",
                       R"({"enc_self":[2,2],"dec_self":[2,2],"enc_dec":[2,2],"head_dim":8})",
                       "4/4/4", 26.0, 1000);
  write_finished_prune(out, "all-l0.1",
                       R"({"enc_self":[1,1],"dec_self":[2,2],"enc_dec":[2,1],"head_dim":8})",
                       "2/4/3", 25.0, 900);
  fs::create_directories(out / "all-l0.1" / "scratch");
  io::write_file_atomic(out / "all-l0.1" / "scratch" / "summary.json", "{}");
  // dev has one reference, test two.
  const fs::path base_ckpt = base / "checkpoints" / "best";
  write_eval_cache(base, base_ckpt, "dev", 30.0, 50.0, {}, {}, 10.0);
  write_eval_cache(base, base_ckpt, "test", 28.0, 48.0, 35.0, 55.0, 12.0);
  write_eval_cache(out / "all-l0", out / "all-l0" / "pruned", "dev", 30.5, 50.5, {}, {}, 10.5);
  write_eval_cache(out / "all-l0", out / "all-l0" / "pruned", "test", 28.5, 48.5, 35.5, 55.5, 12.5);
  write_eval_cache(out / "all-l0.1", out / "all-l0.1" / "pruned", "dev", 29.0, 49.0, {}, {}, 18.0);
  write_eval_cache(out / "all-l0.1", out / "all-l0.1" / "pruned", "test", 27.25, 47.25, 34.0, 54.0,
                   20.0);
  const fs::path scratch = out / "all-l0.1" / "scratch";
  write_eval_cache(scratch, scratch / "checkpoints" / "best", "dev", 26.0, 46.0, {}, {}, 18.0);
  write_eval_cache(scratch, scratch / "checkpoints" / "best", "test", 24.5, 44.5, 31.0, 51.0, 20.0);

  sweep::ReportOptions o;
  o.dir = out;
  o.executable = "/bin/false";  // the caches are fresh: nothing is evaluated
  o.splits = {"dev", "test"};
  const auto r = sweep::write_report(o);
  for (const auto& run : {base, out / "all-l0", out / "all-l0.1", scratch})
    for (const char* split : {"dev", "test"})
      EXPECT_FALSE(fs::exists(run / fmt::format("eval-{}.log", split))) << run << " " << split;
  EXPECT_EQ(r.splits, (std::vector<std::string>{"dev", "test"}));
  ASSERT_EQ(r.rows.size(), 4u);
  // The primary figures are test's (the last split listed), first reference.
  EXPECT_DOUBLE_EQ(*r.rows[0].bleu, 28.0);
  EXPECT_DOUBLE_EQ(*r.rows[0].chrf, 48.0);
  EXPECT_DOUBLE_EQ(*r.rows[0].scores.at("dev").bleu, 30.0);
  EXPECT_FALSE(r.rows[0].scores.at("dev").bleu_all_refs.has_value());
  EXPECT_DOUBLE_EQ(*r.rows[0].scores.at("test").bleu_all_refs, 35.0);
  EXPECT_DOUBLE_EQ(*r.rows[2].delta, 27.25 - 28.0);
  EXPECT_DOUBLE_EQ(*r.rows[2].delta_control, 27.25 - 28.5);
  EXPECT_DOUBLE_EQ(*r.rows[2].bleu_scratch, 24.5);
  EXPECT_DOUBLE_EQ(*r.rows[2].scratch_scores.at("test").bleu_all_refs, 31.0);
  EXPECT_DOUBLE_EQ(*r.rows[2].sentences_per_s, 20.0);
  EXPECT_EQ(r.bleu_label,
            "test BLEU against the first reference (decode.* settings of each "
            "checkpoint)");

  const std::vector<std::string> want_csv = {
      "run,state,prune.lambda,heads_e_d_de,heads_total,parameters,bleu,bleu_scratch,"
      "scratch_state,chrf,bleu_change,control,bleu_change_control,sentences_per_s,bleu_dev,"
      "bleu_test,bleu_test_all_refs,chrf_test_all_refs,bleu_scratch_dev,bleu_scratch_test,"
      "bleu_scratch_test_all_refs,bleu_change_dev,bleu_change_control_dev,bleu_scratch_change,"
      "bleu_scratch_change_dev",
      "baseline,done,,4/4/4,12,1000,28.00,,,48.00,,,,12.0,30.00,28.00,35.00,55.00,,,,,,,",
      "all-l0,done,0,4/4/4,12,1000,28.50,,nothing pruned,48.50,0.50,self,,12.5,30.50,28.50,35.50,"
      "55.50,,,,0.50,,,",
      // dev: 29.0 - 30.0 against the baseline, 29.0 - 30.5 against all-l0; from scratch against
      // from trained: test 24.5 - 27.25, dev 26.0 - 29.0.
      "all-l0.1,done,0.1,2/4/3,9,900,27.25,24.50,done,47.25,-0.75,all-l0,-1.25,20.0,29.00,27.25,"
      "34.00,54.00,26.00,24.50,31.00,-1.00,-1.50,-2.75,-3.00",
      "lambda-1,pending,1,,,,,,pending,,,,,,,,,,,,,,,,"};
  EXPECT_EQ(io::read_lines(out / "results.csv"), want_csv);
  const auto md = io::read_file(out / "results.md");
  for (
      const char* want :
      {"BLEU: test BLEU against the first reference (decode.* settings of each checkpoint), the "
       "last split listed; the change columns (vs baseline, vs control), chrF, sent/s and the "
       "plot are on it. dev BLEU, test BLEU: against the split's first reference; all refs: "
       "against all its references together. dev vs baseline, dev vs control: the same changes on "
       "that split. Heads kept:",
       "; scratch vs trained: BLEU from scratch minus BLEU of the pruned model fine-tuned from the "
       "baseline (from trained).\n",
       "| run | prune.lambda | heads e/d/d-e | total | parameters | dev BLEU | test BLEU | test "
       "BLEU all refs | dev from scratch | test from scratch | test from scratch all refs | chrF "
       "| vs baseline | vs control | dev vs baseline | dev vs control | scratch vs trained | dev "
       "scratch vs trained | sent/s |\n"
       "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
       "---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
       "| baseline | - | 4/4/4 | 12 | 1000 | 30.00 | 28.00 | 35.00 | - | - | - | 48.00 | - | - | "
       "- | - | - | - | 12.0 |\n",
       "| all-l0 (control) | 0 | 4/4/4 | 12 | 1000 | 30.50 | 28.50 | 35.50 | (nothing pruned) | "
       "(nothing pruned) | (nothing pruned) | 48.50 | +0.50 | - | +0.50 | - | - | - | 12.5 |\n",
       "| all-l0.1 | 0.1 | 2/4/3 | 9 | 900 | 29.00 | 27.25 | 34.00 | 26.00 | 24.50 | 31.00 | "
       "47.25 | -0.75 | -1.25 | -1.00 | -1.50 | -2.75 | -3.00 | 20.0 |\n",
       "| lambda-1 (pending) | 1 | (pending) | (pending) | (pending) | (pending) | (pending) | "
       "(pending) | (pending) | (pending) | (pending) | (pending) | - | - | - | - | - | - | - |\n"})
    EXPECT_NE(md.find(want), std::string::npos) << want << "\nnot in\n" << md;
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    const auto dat = io::read_file(out / "plots" / "bleu_vs_heads.dat");
    EXPECT_NE(dat.find("9 27.25 24.50 \"2/4/3\" NaN\n"), std::string::npos) << dat;
  }

  // test,dev: dev is the primary split, its single reference gives no chrF all-refs column.
  o.splits = {"test", "dev"};
  o.plots = false;
  const auto r2 = sweep::write_report(o);
  EXPECT_DOUBLE_EQ(*r2.rows[2].bleu, 29.0);
  EXPECT_DOUBLE_EQ(*r2.rows[2].delta, 29.0 - 30.0);
  EXPECT_DOUBLE_EQ(*r2.rows[2].delta_control, 29.0 - 30.5);
  EXPECT_DOUBLE_EQ(*r2.rows[2].bleu_scratch, 26.0);
  const auto csv2 = io::read_lines(out / "results.csv");
  EXPECT_EQ(csv2[0],
            "run,state,prune.lambda,heads_e_d_de,heads_total,parameters,bleu,bleu_scratch,"
            "scratch_state,chrf,bleu_change,control,bleu_change_control,sentences_per_s,"
            "bleu_test,bleu_test_all_refs,bleu_dev,bleu_scratch_test,bleu_scratch_test_all_refs,"
            "bleu_scratch_dev,bleu_change_test,bleu_change_control_test,bleu_scratch_change,"
            "bleu_scratch_change_test");
  EXPECT_EQ(csv2[3],
            "all-l0.1,done,0.1,2/4/3,9,900,29.00,26.00,done,49.00,-1.00,all-l0,-1.50,18.0,27.25,"
            "34.00,29.00,24.50,31.00,26.00,-0.75,-1.25,-3.00,-2.75");

  // One split with one reference: the table as without per-split columns.
  o.splits = {"dev"};
  sweep::write_report(o);
  const auto csv3 = io::read_lines(out / "results.csv");
  EXPECT_EQ(csv3[0],
            "run,state,prune.lambda,heads_e_d_de,heads_total,parameters,bleu,bleu_scratch,"
            "scratch_state,chrf,bleu_change,control,bleu_change_control,sentences_per_s,"
            "bleu_scratch_change");
  EXPECT_EQ(csv3[3],
            "all-l0.1,done,0.1,2/4/3,9,900,29.00,26.00,done,49.00,-1.00,all-l0,-1.50,18.0,-3.00");
  EXPECT_NE(io::read_file(out / "results.md")
                .find("BLEU: dev BLEU (decode.* settings of each checkpoint). Heads kept:"),
            std::string::npos);
  // One split with two references: its all-refs columns.
  o.splits = {"test"};
  sweep::write_report(o);
  EXPECT_EQ(io::read_lines(out / "results.csv")[3],
            "all-l0.1,done,0.1,2/4/3,9,900,27.25,24.50,done,47.25,-0.75,all-l0,-1.25,20.0,27.25,"
            "34.00,54.00,24.50,31.00,-2.75");

  // Bad splits: the option and the value named.
  o.splits = {"dev", "valid"};
  EXPECT_NE(error_of([&] { sweep::write_report(o); })
                .find("--split: expected dev, test or both comma-separated (dev,test), got "
                      "'valid' in 'dev,valid'"),
            std::string::npos);
  o.splits = {"test", "dev", "test"};
  EXPECT_NE(error_of([&] {
              sweep::write_report(o);
            }).find("--split: 'test' is listed twice in 'test,dev,test'"),
            std::string::npos);
}

// A sweep's committed records (no checkpoints, evaluations made on another machine): the recorded
// evaluations stand; a run whose checkpoint is here but whose evaluation names another one is
// evaluated again (here with a program that fails: no figure rather than a wrong one).
TEST(Report, RecordedEvaluationsStandWhereTheCheckpointIsNotHere) {
  TempDir dir;
  const fs::path out = dir / "records";
  const fs::path base = dir / "base";
  write_baseline(base);
  // No sweep.json: the sweep file names the runs, their control and the baseline.
  const auto sweep_file = write_sweep(dir, "s.yaml",
                                      fmt::format(R"(command: prune
configs: [{}]
set: {{prune.init_from: runs/x/checkpoints/best}}
runs:
  - {{name: all-l0, prune.lambda: 0, control: true}}
  - {{name: all-l0.1, prune.lambda: 0.1}}
  - {{name: all-l1, prune.lambda: 1}}
baseline: {}
)",
                                                  tiny_base(dir, 10).string(), base.string()));
  write_finished_prune(out, "all-l0",
                       R"({"enc_self":[2,2],"dec_self":[2,2],"enc_dec":[2,2],"head_dim":8})",
                       "4/4/4", 26.0, 1000);
  write_finished_prune(out, "all-l0.1",
                       R"({"enc_self":[1,1],"dec_self":[2,2],"enc_dec":[2,1],"head_dim":8})",
                       "2/4/3", 25.0, 900);
  write_finished_prune(out, "all-l1",
                       R"({"enc_self":[0,0],"dec_self":[1,0],"enc_dec":[1,1],"head_dim":8})",
                       "0/1/2", 20.0, 700);
  const fs::path base_ckpt = base / "checkpoints" / "best";
  write_eval_cache(base, base_ckpt, "dev", 30.0, 50.0, {}, {}, 10.0);
  // Evaluated elsewhere (/elsewhere/RUN/pruned), committed without the checkpoint.
  for (const auto& [name, bleu] : {std::pair{"all-l0", 30.5}, std::pair{"all-l0.1", 29.25}}) {
    const fs::path elsewhere = fs::path("/elsewhere") / name / "pruned";
    write_eval_cache(out / name, out / name / "pruned", "dev", bleu, 50.0, {}, {}, 11.0);
    auto j = nlohmann::json::parse(io::read_file(out / name / "eval-dev.json"));
    j["checkpoint"] = elsewhere.string();
    io::write_file_atomic(out / name / "eval-dev.json", j.dump(2));
    fs::remove_all(out / name / "pruned");
  }
  // all-l1: its checkpoint is here, its evaluation names another one (stale).
  write_eval_cache(out / "all-l1", out / "all-l1" / "pruned", "dev", 99.0, 99.0, {}, {}, 1.0);
  auto stale = nlohmann::json::parse(io::read_file(out / "all-l1" / "eval-dev.json"));
  stale["checkpoint"] = "/elsewhere/all-l1/pruned";
  io::write_file_atomic(out / "all-l1" / "eval-dev.json", stale.dump(2));

  sweep::ReportOptions o;
  o.dir = out;
  o.executable = "/bin/false";
  o.splits = {"dev"};
  o.plots = false;
  EXPECT_NE(error_of([&] { sweep::write_report(o); })
                .find("is not a sweep folder: no sweep.json (run `headcount sweep` first, or "
                      "name the sweep file its runs came from with --sweep)"),
            std::string::npos);
  o.sweep_file = sweep_file;
  const auto r = sweep::write_report(o);
  EXPECT_FALSE(fs::exists(out / "sweep.json"));  // the records folder is only read and reported
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[2].control, "all-l0");
  ASSERT_TRUE(r.rows[1].bleu && r.rows[2].bleu && r.rows[2].delta_control);
  EXPECT_DOUBLE_EQ(*r.rows[1].bleu, 30.5);
  EXPECT_DOUBLE_EQ(*r.rows[2].bleu, 29.25);
  EXPECT_DOUBLE_EQ(*r.rows[2].delta, 29.25 - 30.0);
  EXPECT_DOUBLE_EQ(*r.rows[2].delta_control, 29.25 - 30.5);
  EXPECT_FALSE(fs::exists(out / "all-l0.1" / "eval-dev.log"));
  EXPECT_FALSE(r.rows[3].bleu.has_value());  // re-evaluated, and that failed
  EXPECT_TRUE(fs::exists(out / "all-l1" / "eval-dev.log"));
}

// End to end: a tiny baseline, a prune sweep of two lambdas with from-scratch retraining, and the
// report over it.
TEST(Sweep, PruneSweepWithRetrainingAndReport) {
  TempDir dir;
  const auto base_cfg = tiny_base(dir, 60);
  const fs::path base = dir / "base";
  ASSERT_EQ(std::system(fmt::format("{} train {} --out {} >/dev/null 2>&1", HEADCOUNT_BINARY,
                                    base_cfg.string(), base.string())
                            .c_str()),
            0);
  const auto file = write_sweep(dir, "s.yaml",
                                fmt::format(R"(command: prune
configs: [{0}]
set: {{prune.init_from: {1}/checkpoints/last, train.max_steps: 60, train.eval_every: 20,
      train.lr: 0.001, train.warmup_steps: 10, prune.gate_lr: 0.1}}
grid:
  prune.lambda: [0.0, 100.0]
controls: [lambda-0.0]
baseline: {1}
retrain:
  configs: [{0}]
  set: {{train.max_steps: 10, train.eval_every: 10}}
)",
                                            base_cfg.string(), base.string()));
  const auto spec = sweep::load_sweep(file);
  sweep::SweepOptions o;
  o.out = dir / "out";
  o.executable = HEADCOUNT_BINARY;
  o.workers = 2;
  o.cores = 2;
  // One run picked by name, its retraining left for later.
  o.names = {"lambda-100.0"};
  o.no_retrain = true;
  const auto first = sweep::run_sweep(spec, o);
  EXPECT_EQ(first.done, 1);
  EXPECT_EQ(sweep::run_state(o.out / "lambda-100.0"), sweep::RunState::kDone);
  EXPECT_EQ(sweep::run_state(o.out / "lambda-0.0"), sweep::RunState::kPending);
  EXPECT_FALSE(fs::exists(o.out / "lambda-100.0" / "scratch"));
  o.names = {"lambda-3"};
  EXPECT_NE(error_of([&] {
              sweep::run_sweep(spec, o);
            }).find("no run named 'lambda-3' (its runs: lambda-0.0, lambda-100.0)"),
            std::string::npos);
  // Then everything: the finished run is skipped, the rest runs.
  o.names.clear();
  o.no_retrain = false;
  const auto r = sweep::run_sweep(spec, o);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.skipped, 1);
  // The other prune run and one retraining: lambda 0 removed no head, and retraining the
  // baseline's own architecture would only repeat the baseline.
  EXPECT_EQ(r.done, 2);
  EXPECT_EQ(sweep::run_state(o.out / "lambda-100.0" / "scratch"), sweep::RunState::kDone);
  EXPECT_TRUE(sweep::nothing_pruned(o.out / "lambda-0.0"));
  EXPECT_FALSE(sweep::nothing_pruned(o.out / "lambda-100.0"));
  EXPECT_FALSE(fs::exists(o.out / "lambda-0.0" / "scratch"));
  sweep::ReportOptions ro;
  ro.dir = o.out;
  ro.executable = HEADCOUNT_BINARY;
  ro.plots = false;
  const auto rep = sweep::write_report(ro);
  ASSERT_EQ(rep.rows.size(), 3u);
  EXPECT_EQ(*rep.rows[0].heads, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(*rep.rows[1].heads, (std::vector<int64_t>{2, 2, 2}));  // lambda 0 keeps every head
  EXPECT_EQ(*rep.rows[2].heads, (std::vector<int64_t>{0, 0, 0}));  // lambda 100 removes them all
  EXPECT_FALSE(rep.rows[1].bleu_scratch.has_value());
  EXPECT_EQ(rep.rows[1].scratch_state, "nothing pruned");
  EXPECT_NE(io::read_file(o.out / "results.md").find("(nothing pruned)"), std::string::npos);
  EXPECT_TRUE(rep.rows[2].bleu_scratch.has_value());
  EXPECT_LT(*rep.rows[2].parameters, *rep.rows[1].parameters);
  // lambda 0 is the control of lambda 100.
  EXPECT_TRUE(rep.rows[1].is_control);
  EXPECT_EQ(rep.rows[2].control, "lambda-0.0");
  ASSERT_TRUE(rep.rows[2].delta_control.has_value());
  EXPECT_DOUBLE_EQ(*rep.rows[2].delta_control, *rep.rows[2].bleu - *rep.rows[1].bleu);
  EXPECT_NE(io::read_file(o.out / "results.md").find("| lambda-0.0 (control) |"),
            std::string::npos);
  // The retrained architecture is the pruned one.
  const auto arch = nlohmann::json::parse(io::read_file(
      o.out / "lambda-100.0" / "scratch" / "checkpoints" / "last" / "architecture.json"));
  EXPECT_EQ(arch["heads_e_d_de"], "0/0/0");
  // Evaluating on a split goes through `headcount eval` and is cached in the run folders; with
  // two splits the last one (test) is the primary, the tiny corpus has one test reference.
  ro.splits = {"dev", "test"};
  const auto rep2 = sweep::write_report(ro);
  EXPECT_TRUE(fs::exists(o.out / "lambda-0.0" / "eval-dev.json"));
  EXPECT_TRUE(fs::exists(o.out / "lambda-0.0" / "eval-test.json"));
  EXPECT_TRUE(rep2.rows[1].sentences_per_s.has_value());
  EXPECT_TRUE(rep2.rows[2].bleu_scratch.has_value());
  ASSERT_EQ(rep2.rows[2].scores.size(), 2u);
  EXPECT_EQ(rep2.rows[2].bleu, rep2.rows[2].scores.at("test").bleu);
  EXPECT_EQ(rep2.rows[2].bleu_scratch, rep2.rows[2].scratch_scores.at("test").bleu);
  EXPECT_FALSE(rep2.rows[2].scores.at("test").bleu_all_refs.has_value());
  const auto header = io::read_lines(o.out / "results.csv").at(0);
  EXPECT_EQ(header.substr(header.find(",sentences_per_s")),
            ",sentences_per_s,bleu_dev,bleu_test,bleu_scratch_dev,bleu_scratch_test,"
            "bleu_change_dev,bleu_change_control_dev,bleu_scratch_change,bleu_scratch_change_dev,"
            "p_control,p_baseline,p_bleu_change_dev,p_bleu_change_control_dev,"
            "p_bleu_scratch_change,p_bleu_scratch_change_dev");
  // The evaluations recorded their translations and references: the pruned run's difference to
  // its control comes with a paired bootstrap p-value (the two models' tests differ or not; the
  // value is a probability either way).
  EXPECT_TRUE(fs::exists(o.out / "lambda-100.0" / "eval-test.hyp.txt"));
  ASSERT_TRUE(rep2.rows[2].p_control.has_value());
  EXPECT_GT(*rep2.rows[2].p_control, 0.0);
  EXPECT_LE(*rep2.rows[2].p_control, 1.0);
  // Every change with translations on both sides carries one too (here all of them: the
  // baseline's evaluations went through `headcount eval` as well); the control's row has no
  // change against itself, so its p-value against the control is empty.
  const auto csv_rows = io::read_lines(o.out / "results.csv");
  const auto names = text::split(header, ',');
  const auto p_at = std::find(names.begin(), names.end(), "p_bleu_change_control_dev");
  ASSERT_NE(p_at, names.end());
  const auto control_cells = text::split(csv_rows.at(2), ',');
  const auto run_cells = text::split(csv_rows.at(3), ',');
  ASSERT_EQ(run_cells.size(), names.size());
  const auto k = static_cast<size_t>(p_at - names.begin());
  EXPECT_EQ(control_cells.at(k), "");
  for (size_t i = k - 3; i < names.size(); ++i) {  // p_control onwards
    const double p = std::stod(run_cells.at(i));
    EXPECT_GT(p, 0.0) << names[i];
    EXPECT_LE(p, 1.0) << names[i];
  }
  // With --analysis: the kept heads by function and L0 against importance pruning, per run (on
  // the first split listed: dev, cached in RUN/analysis).
  ro.analysis_sentences = 8;
  const auto rep3 = sweep::write_report(ro);
  const auto rows = io::read_lines(o.out / "results_analysis.csv");
  ASSERT_EQ(rows.size(), 3u) << rep3.analysis_markdown;
  auto field = [](const std::string& line, size_t k) { return text::split(line, ',').at(k); };
  // lambda 0 keeps all 6 heads, each with at least one function ("none" included); lambda 100
  // keeps none.
  EXPECT_EQ(field(rows[1], 1), "6") << rows[1];
  EXPECT_GE(std::stoi(field(rows[1], 2)) + std::stoi(field(rows[1], 3)) +
                std::stoi(field(rows[1], 4)) + std::stoi(field(rows[1], 5)),
            6)
      << rows[1];
  EXPECT_EQ(field(rows[1], 3), "0") << rows[1];  // syntactic: no parses given
  EXPECT_EQ(rows[2].substr(0, rows[2].find(',', rows[2].find(',') + 1)), "lambda-100.0,0")
      << rows[2];
  const auto cmp =
      nlohmann::json::parse(io::read_file(o.out / "lambda-100.0" / "analysis" / "compare.json"));
  EXPECT_EQ(cmp["removed_heads"], 6);
  EXPECT_EQ(cmp["gated_heads"], 6);
  // Every head masked either way: L0's and importance's masks are the same set.
  EXPECT_DOUBLE_EQ(cmp["bleu_l0_heads_masked_no_finetuning"].get<double>(),
                   cmp["bleu_michel_same_counts_masked_no_finetuning"].get<double>());
  EXPECT_NE(rep3.analysis_markdown.find("| lambda-0.0 |"), std::string::npos);
  // LRP relevance of the starting model against each run's removal order.
  EXPECT_NE(rows[0].find(",spearman_lrp_removal,"), std::string::npos) << rows[0];
  const auto rel =
      nlohmann::json::parse(io::read_file(o.out / "lambda-100.0" / "analysis" / "relevance.json"));
  EXPECT_EQ(rel["sentences"], 8);
  EXPECT_EQ(io::read_lines(o.out / "lambda-100.0" / "analysis" / "relevance.csv").size(), 7u);
}

}  // namespace
}  // namespace headcount
