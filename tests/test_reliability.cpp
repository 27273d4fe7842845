// Reliability: a kill in any window of a save, a full disk, two processes on one run folder,
// Ctrl-C on a sweep, NaN in a config, a dev set the model cannot hold, a foreign config.yaml.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/common/run_guard.h"
#include "headcount/run/checkpoint.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::error_of;
using testing::TempDir;

struct Exit {
  int code = -1;    // exit status, or -1 when killed
  int signal = 0;   // the signal that killed it
  std::string err;  // its stderr
};

// Runs the headcount binary with `args` (and `env` assignments before it) in a shell.
Exit run_cli(const std::string& args, const std::string& env = "") {
  TempDir tmp;
  const std::string cmd = fmt::format("{} exec {} {} >/dev/null 2>{}", env, HEADCOUNT_BINARY, args,
                                      (tmp / "err").string());
  const int status = std::system(cmd.c_str());
  Exit e;
  // The shell exec'd headcount: its status is headcount's.
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
  } else {
    e.code = WEXITSTATUS(status);
  }
  e.err = io::read_file(tmp / "err");
  return e;
}

// A record of a run folder that must not depend on where the run was interrupted: event logs
// without timings, checkpoint steps, the bytes of the weights, the summary's outcome.
struct RunRecord {
  std::vector<std::string> metrics, gates;
  std::map<std::string, int64_t> checkpoint_steps;  // checkpoints/NAME -> its step
  std::map<std::string, std::string> weights;       // checkpoints/NAME/model.pt bytes
  std::string best_step, head_removal, pruned_weights;
};

std::vector<std::string> events_without_timing(const fs::path& file) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(file, ec)) return out;
  for (const auto& line : io::read_lines(file, {.allow_empty_file = true})) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    for (const char* k : {"elapsed_s", "tgt_tokens_per_s"}) j.erase(k);
    out.push_back(j.dump());
  }
  return out;
}

RunRecord record_of(const fs::path& run) {
  RunRecord r;
  r.metrics = events_without_timing(run / "metrics.jsonl");
  r.gates = events_without_timing(run / "gates.jsonl");
  for (const auto& e : fs::directory_iterator(run / "checkpoints")) {
    const std::string name = e.path().filename().string();
    r.checkpoint_steps[name] =
        nlohmann::json::parse(io::read_file(e.path() / "state.json"))["step"].get<int64_t>();
    r.weights[name] = io::read_file(e.path() / "model.pt");
  }
  const auto summary = nlohmann::json::parse(io::read_file(run / "summary.json"));
  r.best_step = summary["best_step"].dump() + " " + summary["best_score"].dump();
  std::error_code ec;
  if (fs::exists(run / "head_removal.csv", ec))
    r.head_removal = io::read_file(run / "head_removal.csv");
  if (fs::exists(run / "pruned", ec)) r.pruned_weights = io::read_file(run / "pruned" / "model.pt");
  return r;
}

void expect_same_record(const RunRecord& a, const RunRecord& b, const std::string& what) {
  EXPECT_EQ(a.metrics, b.metrics) << what;
  EXPECT_EQ(a.gates, b.gates) << what;
  EXPECT_EQ(a.checkpoint_steps, b.checkpoint_steps) << what;
  for (const auto& [name, bytes] : a.weights) {
    ASSERT_TRUE(b.weights.count(name)) << what << ": checkpoints/" << name;
    EXPECT_TRUE(bytes == b.weights.at(name)) << what << ": checkpoints/" << name << "/model.pt";
  }
  EXPECT_EQ(a.best_step, b.best_step) << what;
  EXPECT_EQ(a.head_removal, b.head_removal) << what;
  EXPECT_TRUE(a.pruned_weights == b.pruned_weights) << what << ": pruned/model.pt";
}

// The moments between the writes of a save (see crash_point calls in train/): inside a
// checkpoint's write, between `last`, `best` and `step-N`, before summary.json.
const char* const kCrashPoints[] = {
    "checkpoint.written", "checkpoint.swapped", "checkpoint.copied",   "train.saved_last",
    "train.saved_best",   "train.saved_step",   "train.before_summary"};

// How many passages of each crash point the kill tests kill at: every one (until a run passes the
// point fewer times and ends) unless HEADCOUNT_TEST_KILL_PASSAGES=N limits it to the first N, as
// scripts/sanitize.sh does (every point and every resume path is still reached; under the
// sanitizers each kill-and-resume cycle of the CLI costs several times what it does here).
constexpr int kAllPassages = 40;  // more than any crash point is passed in these runs

int kill_passages() {
  const char* v = std::getenv("HEADCOUNT_TEST_KILL_PASSAGES");
  if (v == nullptr || *v == '\0') return kAllPassages;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1) {
    ADD_FAILURE() << "HEADCOUNT_TEST_KILL_PASSAGES: expected a whole number from 1, got '" << v
                  << "'";
    return kAllPassages;
  }
  return static_cast<int>(std::min<long>(n, kAllPassages));
}

// Kills `command` (train or prune, on `config`) at every passage of every crash point (the 1st,
// the 2nd, ... until a run passes the point fewer times and ends; the first kill_passages()),
// resumes it, and compares the finished run folder with an uninterrupted one.
void kill_at_every_window_and_resume(const TempDir& dir, const std::string& command,
                                     const fs::path& config) {
  const auto cmd = [&](const fs::path& out) {
    return fmt::format("{} {} --out {}", command, config.string(), out.string());
  };
  const Exit ref = run_cli(cmd(dir / "ref"));
  ASSERT_EQ(ref.code, 0) << ref.err;
  const RunRecord expected = record_of(dir / "ref");
  const int limit = kill_passages();
  int kills = 0;
  for (const char* point : kCrashPoints) {
    int passages = 0;
    for (int hit = 1; hit <= limit; ++hit) {
      const std::string spec = fmt::format("{}#{}", point, hit);
      const fs::path out = dir / fmt::format("{}-{}", point, hit);
      const Exit killed = run_cli(cmd(out), "HEADCOUNT_CRASH_AT=" + spec);
      if (killed.code == 0) {  // fewer passages: an uninterrupted run, the same as the first
        expect_same_record(expected, record_of(out), spec + " (not reached)");
        fs::remove_all(out);
        break;
      }
      ASSERT_EQ(killed.signal, SIGKILL) << spec << ": " << killed.err;
      ++kills, ++passages;
      const Exit resumed = run_cli(cmd(out));
      ASSERT_EQ(resumed.code, 0) << spec << ": " << resumed.err;
      expect_same_record(expected, record_of(out), spec);
      // No temporary folder outlives the resumed run.
      for (const auto& e : fs::recursive_directory_iterator(out)) {
        EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos)
            << spec << ": " << e.path();
      }
      fs::remove_all(out);
    }
    EXPECT_GE(passages, 1) << point << " was never reached";
  }
  // Some points are passed once a run (before summary.json), the saves several times.
  EXPECT_GE(kills, std::min(15, static_cast<int>(std::size(kCrashPoints)) + limit - 1))
      << "too few windows were reached";
}

Config kill_test_config(const TempDir& dir) {
  Config c = tiny_run_config(dir, 32);
  c.model.dropout = 0.1;  // the random state must be restored too
  c.train.max_steps = 20;
  c.train.eval_every = 10;
  c.train.save_every = 5;
  c.train.log_every = 5;
  c.train.keep_last = 2;
  c.train.eval_max_sentences = 4;
  return c;
}

TEST(Reliability, TrainKilledInEveryWindowOfASaveEndsAsAnUninterruptedRun) {
  TempDir dir;
  Config c = kill_test_config(dir);
  save_config(c, dir / "train.yaml");
  kill_at_every_window_and_resume(dir, "train", dir / "train.yaml");
}

// The prune kill tests' start: a 40-step baseline trained in `dir` (2 encoder layers, 4 heads),
// and a config for 20 pruning steps from its last checkpoint.
Config kill_baseline(const TempDir& dir) {
  Config c = kill_test_config(dir);
  c.model.heads = 4;
  c.model.encoder_layers = 2;
  c.train.max_steps = 40;
  save_config(c, dir / "base.yaml");
  const Exit base = run_cli(
      fmt::format("train {} --out {}", (dir / "base.yaml").string(), (dir / "base").string()));
  EXPECT_EQ(base.code, 0) << base.err;
  c.prune.init_from = (dir / "base" / "checkpoints" / "last").string();
  c.train.max_steps = 20;
  return c;
}

// The prune modes, each built on the one before.
Config lambda_mode(Config c) {
  c.prune.lambda = 0.5;
  c.prune.gate_lr = 0.2;
  return c;
}

// Target mode with a recovery phase: a kill before, at or after the mask was fixed resumes to the
// same mask and the same weights.
Config with_recovery(Config c) {
  c = lambda_mode(c);
  c.prune.lambda = 0.05;
  c.prune.target_heads = 5;
  c.prune.target_warmup_steps = 6;
  c.prune.lagrangian_lr = 0.5;
  c.prune.recovery_steps = 8;
  return c;
}

// The mask fixed when the expected count reaches the target (a step the checkpoint records), with
// distillation from the init model.
Config with_fix_at_target(Config c) {
  c = with_recovery(c);
  c.prune.fix_at_target = true;
  c.prune.lagrangian_lr = 20;
  c.prune.gate_lr = 0.3;
  c.prune.distill_weight = 0.5;
  return c;
}

// And the weights rewound to the init model's when the mask is fixed (a fresh optimizer, the
// warm-up again), the run ending exactly recovery_steps after that step.
Config with_rewind(Config c) {
  c = with_fix_at_target(c);
  c.prune.rewind = true;
  c.prune.exact_recovery = true;
  return c;
}

// A target per attention type (a pair of multipliers per type in the checkpoint).
Config with_targets_per_type(Config c) {
  c = with_rewind(c);
  c.prune.target_heads = 0;
  c.prune.target_heads_per_type = {1, 2, 2};
  return c;
}

// Each prune mode is its own test, so that each stays well within the per-test timeout under the
// sanitizers (a mode is some 40 kill-and-resume cycles of the CLI).
void prune_killed_in_every_window(Config (*mode)(Config)) {
  TempDir dir;
  const Config c = mode(kill_baseline(dir));
  ASSERT_FALSE(::testing::Test::HasFailure());
  save_config(c, dir / "prune.yaml");
  kill_at_every_window_and_resume(dir, "prune", dir / "prune.yaml");
}

TEST(Reliability, PruneKilledInEveryWindowOfASaveEndsAsAnUninterruptedRun) {
  prune_killed_in_every_window(lambda_mode);
}

TEST(Reliability, PruneWithRecoveryKilledInEveryWindowEndsAsAnUninterruptedRun) {
  prune_killed_in_every_window(with_recovery);
}

TEST(Reliability, PruneFixedAtTargetWithDistillationKilledInEveryWindowEndsAsAnUninterruptedRun) {
  prune_killed_in_every_window(with_fix_at_target);
}

TEST(Reliability, PruneWithRewindKilledInEveryWindowEndsAsAnUninterruptedRun) {
  prune_killed_in_every_window(with_rewind);
}

TEST(Reliability, PruneWithTargetsPerTypeKilledInEveryWindowEndsAsAnUninterruptedRun) {
  prune_killed_in_every_window(with_targets_per_type);
}

// prune.gate_seeds: a kill inside either gate run, between them, or in the run's own recovery
// steps resumes to the same gate runs, the same mask of their mean and the same weights as an
// uninterrupted command (the kills at several passages of the save of `last`, which every run
// passes at its checkpoints; not every window: the whole command is three runs).
TEST(Reliability, PruneWithGateSeedsKilledAnywhereEndsAsAnUninterruptedRun) {
  TempDir dir;
  Config c = kill_baseline(dir);
  ASSERT_FALSE(HasFailure());
  c.prune.target_heads = 5;
  c.prune.target_warmup_steps = 6;
  c.prune.lagrangian_lr = 20;
  c.prune.gate_lr = 0.3;
  c.prune.recovery_steps = 8;
  c.prune.fix_at_target = true;
  c.prune.rewind = true;
  c.prune.exact_recovery = true;
  c.prune.target_split = TargetSplit::kExpected;
  c.prune.gate_seeds = {2, 3};
  save_config(c, dir / "avg.yaml");
  const auto cmd = [&](const fs::path& out) {
    return fmt::format("prune {} --out {}", (dir / "avg.yaml").string(), out.string());
  };
  const auto records = [](const fs::path& run) {
    return std::vector<RunRecord>{record_of(run / "gate-seeds" / "seed-2"),
                                  record_of(run / "gate-seeds" / "seed-3"), record_of(run)};
  };
  const Exit ref = run_cli(cmd(dir / "ref"));
  ASSERT_EQ(ref.code, 0) << ref.err;
  const auto expected = records(dir / "ref");
  int kills = 0;
  for (int hit = 1; hit <= kAllPassages; hit += 2) {
    const std::string spec = fmt::format("train.saved_last#{}", hit);
    const fs::path out = dir / fmt::format("killed-{}", hit);
    const Exit killed = run_cli(cmd(out), "HEADCOUNT_CRASH_AT=" + spec);
    if (killed.code == 0) break;  // fewer passages
    ASSERT_EQ(killed.signal, SIGKILL) << spec << ": " << killed.err;
    ++kills;
    const Exit resumed = run_cli(cmd(out));
    ASSERT_EQ(resumed.code, 0) << spec << ": " << resumed.err;
    const auto got = records(out);
    for (size_t i = 0; i < got.size(); ++i)
      expect_same_record(expected[i], got[i], fmt::format("{} (run {} of 3)", spec, i + 1));
    fs::remove_all(out);
  }
  // The saves of `last`: each gate run's (at least its evaluations and its end) and the run's.
  EXPECT_GE(kills, 4);
}

// A kill after `last` but before `best`: the resumed run repairs `best` (and step-N) from `last`
// before going on, so that best_step and checkpoints/best agree at every moment after a resume.
TEST(Reliability, ResumeRepairsBestAndStepCheckpointsLeftBehindByAKill) {
  TempDir dir;
  Config c = kill_test_config(dir);
  c.train.max_steps = 20;
  save_config(c, dir / "c.yaml");
  const std::string args =
      fmt::format("train {} --out {}", (dir / "c.yaml").string(), (dir / "run").string());
  // The 2nd evaluation (step 20) improves BLEU or not; the 1st (step 10) always sets best.
  const Exit killed = run_cli(args, "HEADCOUNT_CRASH_AT=train.saved_last#1");
  ASSERT_EQ(killed.signal, SIGKILL) << killed.err;
  const fs::path ck = dir / "run" / "checkpoints";
  EXPECT_FALSE(fs::exists(ck / "best"));
  EXPECT_FALSE(fs::exists(ck / "step-10"));
  const auto last = nlohmann::json::parse(io::read_file(ck / "last" / "state.json"));
  EXPECT_EQ(last["step"], 10);
  EXPECT_EQ(last["best_step"], 10);
  // Resume for no further step: the repair alone.
  const Exit resumed = run_cli(args + " --set train.max_steps=10");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(io::read_file(ck / "best" / "state.json"))["step"], 10);
  EXPECT_EQ(nlohmann::json::parse(io::read_file(ck / "step-10" / "state.json"))["step"], 10);
  EXPECT_TRUE(io::read_file(ck / "best" / "model.pt") == io::read_file(ck / "last" / "model.pt"));
}

// Runs f in a child process with a file-size limit of `bytes` (writes beyond it fail with EFBIG:
// SIGXFSZ ignored), as a full disk would; returns the child's exit status.
int with_file_size_limit(rlim_t bytes, const std::function<int()>& f) {
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{bytes, bytes};
    setrlimit(RLIMIT_FSIZE, &lim);
    _exit(f());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Reliability, AFullDiskIsOneErrorAndLeavesTheOldFilesAndNoTemporaries) {
  TempDir dir;
  io::write_file_atomic(dir / "kept.txt", "old contents\n");
  const int code = with_file_size_limit(1000, [&] {
    const std::string msg =
        error_of([&] { io::write_file_atomic(dir / "kept.txt", std::string(5000, 'x')); });
    return msg.find("kept.txt: write failed") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(io::read_file(dir / "kept.txt"), "old contents\n");
  // An event log: the error names the file; the log keeps whole lines only.
  io::append_line(dir / "events.jsonl", "{\"step\": 1}");
  const int code2 = with_file_size_limit(100, [&] {
    const std::string msg =
        error_of([&] { io::append_line(dir / "events.jsonl", std::string(500, 'y')); });
    return msg.find("events.jsonl: write failed") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(code2, 0);
  EXPECT_EQ(io::read_file(dir / "events.jsonl"), "{\"step\": 1}\n");

  // A checkpoint: the training run of the CLI, with room for one checkpoint and not two (the
  // optimizer state is the largest file): one error line, exit 1, the first checkpoint intact.
  Config c = kill_test_config(dir);
  c.train.max_steps = 20;
  c.train.eval_every = 100;
  save_config(c, dir / "c.yaml");
  const std::string args =
      fmt::format("train {} --out {}", (dir / "c.yaml").string(), (dir / "run").string());
  ASSERT_EQ(run_cli(args + " --set train.max_steps=5").code, 0);
  const std::string weights = io::read_file(dir / "run" / "checkpoints" / "last" / "model.pt");
  const Exit full =
      run_cli(args, "ulimit -f 40; trap '' XFSZ;");  // 40 KiB: less than model + optimizer
  EXPECT_EQ(full.code, 1) << full.err;
  size_t errors = 0;
  for (size_t at = full.err.find("headcount: error"); at != std::string::npos;
       at = full.err.find("headcount: error", at + 1))
    ++errors;
  EXPECT_EQ(errors, 1u) << full.err;
  EXPECT_NE(full.err.find("headcount: error: cannot write checkpoint"), std::string::npos)
      << full.err;
  EXPECT_EQ(full.err.find("terminate called"), std::string::npos) << full.err;
  EXPECT_TRUE(io::read_file(dir / "run" / "checkpoints" / "last" / "model.pt") == weights);
  for (const auto& e : fs::recursive_directory_iterator(dir / "run"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Reliability, TwoProcessesCannotWriteOneRunFolder) {
  TempDir dir;
  // A lock held by a live process: the second writer's error names its PID.
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const pid_t holder = fork();
  if (holder == 0) {
    auto lock = io::RunLock::acquire(dir / "run");
    char b = 1;
    (void)!write(ready[1], &b, 1);
    (void)!read(release[0], &b, 1);
    _exit(0);
  }
  char b = 0;
  ASSERT_EQ(read(ready[0], &b, 1), 1);
  EXPECT_EQ(io::RunLock::holder(dir / "run").value_or(-1), holder);
  const std::string msg = error_of([&] { io::RunLock::acquire(dir / "run"); });
  EXPECT_NE(msg.find(fmt::format("in use by another process (PID {}", holder)), std::string::npos)
      << msg;
  // The CLI refuses the same folder with that error, before touching it.
  Config c = kill_test_config(dir);
  save_config(c, dir / "c.yaml");
  const Exit second =
      run_cli(fmt::format("train {} --out {}", (dir / "c.yaml").string(), (dir / "run").string()));
  EXPECT_EQ(second.code, 1);
  EXPECT_NE(second.err.find(fmt::format("PID {}", holder)), std::string::npos) << second.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "metrics.jsonl"));
  // A killed holder releases the lock (the kernel does): the folder is usable again.
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_FALSE(io::RunLock::holder(dir / "run").has_value());
  EXPECT_TRUE(io::RunLock::acquire(dir / "run").held());
}

TEST(Reliability, TemporariesOfDeadProcessesAreRemovedOthersKept) {
  TempDir dir;
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  fs::create_directories(dir / fmt::format(".last.tmp.{}", dead));
  io::write_file_atomic(dir / fmt::format(".last.tmp.{}", dead) / "model.pt", "x");
  fs::create_directories(dir / fmt::format(".best.old.{}", dead));
  fs::create_directories(dir / fmt::format(".last.tmp.{}", getpid()));  // a live process's
  fs::create_directories(dir / "step-10");
  EXPECT_EQ(io::remove_stale_temporaries(dir.path()), 2);
  EXPECT_FALSE(fs::exists(dir / fmt::format(".last.tmp.{}", dead)));
  EXPECT_TRUE(fs::exists(dir / fmt::format(".last.tmp.{}", getpid())));
  EXPECT_TRUE(fs::exists(dir / "step-10"));
}

TEST(Reliability, NanIsRejectedForEveryNumberKey) {
  for (const char* key : {"train.label_smoothing", "model.dropout", "train.clip_norm",
                          "data.max_length_ratio", "train.lr", "prune.lambda"}) {
    for (const char* nan : {".nan", ".NaN", "nan"}) {
      ConfigLoader loader;
      const std::string msg = error_of([&] { loader.apply_set(fmt::format("{}={}", key, nan)); });
      EXPECT_NE(msg.find(key), std::string::npos) << key << "=" << nan << ": " << msg;
      EXPECT_NE(msg.find("expected a number"), std::string::npos)
          << key << "=" << nan << ": " << msg;
    }
  }
  TempDir dir;
  std::ofstream(dir / "c.yaml") << "train:\n  lr: .nan\n";
  const std::string msg = error_of([&] { load_config_file(dir / "c.yaml"); });
  EXPECT_NE(msg.find("c.yaml:2: train.lr: expected a number, got '.nan' (NaN)"), std::string::npos)
      << msg;
}

TEST(Reliability, DuplicatedKeysFoldersAndMissingFilesAsConfigs) {
  TempDir dir;
  std::ofstream(dir / "dup.yaml") << "train:\n  lr: 0.1\n  max_steps: 5\n  lr: 0.2\n";
  std::string msg = error_of([&] { load_config_file(dir / "dup.yaml"); });
  EXPECT_NE(msg.find("dup.yaml:4: key 'lr' given twice (first at"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dup.yaml:2"), std::string::npos) << msg;
  // The CLI: headcount's own one-line error for a missing config file and for a folder.
  for (const auto& [arg, want] : std::vector<std::pair<std::string, std::string>>{
           {(dir / "missing.yaml").string(), "missing.yaml not found"},
           {dir.path().string(), "is a folder, expected a YAML config file"}}) {
    const Exit e = run_cli("config show " + arg);
    EXPECT_EQ(e.code, 1) << e.err;
    EXPECT_NE(e.err.find("headcount: error: "), std::string::npos) << e.err;
    EXPECT_NE(e.err.find(want), std::string::npos) << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
  }
  const Exit sweep =
      run_cli(fmt::format("sweep {} --out {}", dir.path().string(), (dir / "out").string()));
  EXPECT_EQ(sweep.code, 1) << sweep.err;
  EXPECT_NE(sweep.err.find("is a folder, expected a sweep file"), std::string::npos) << sweep.err;
}

TEST(Reliability, ADevSentenceTheModelCannotHoldIsAnErrorBeforeTheFirstStep) {
  TempDir dir;
  Config c = kill_test_config(dir);
  c.model.max_positions = 16;
  c.train.max_len = 12;
  std::vector<std::string> es = io::read_lines(dir / "dev.es");
  std::vector<std::string> en = io::read_lines(dir / "dev.en");
  std::string long_line;
  for (int i = 0; i < 40; ++i) long_line += "uno dos ";
  es[3] = long_line;
  io::write_lines_atomic(dir / "dev.es", es);
  train::TrainOptions o;
  o.run_dir = dir / "run";
  std::string msg = error_of([&] { train::train_command(c, o); });
  EXPECT_NE(msg.find((dir / "dev.es").string() + ":4: this dev sentence is"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("model.max_positions (16)"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints" / "last"));
  // train.max_len must leave room for the end token in the position table.
  ConfigLoader loader;
  loader.apply_set("model.max_positions=64");
  loader.apply_set("train.max_len=64");
  msg = error_of([&] { loader.finish(); });
  EXPECT_NE(msg.find("train.max_len (64"), std::string::npos) << msg;
}

TEST(Reliability, TheUsersOwnConfigInTheOutFolderIsNeverOverwritten) {
  TempDir dir;
  Config c = kill_test_config(dir);
  save_config(c, dir / "c.yaml");
  fs::create_directories(dir / "mine");
  std::ofstream(dir / "mine" / "config.yaml") << "# my notes\ntrain:\n  lr: 0.5\n";
  const Exit e =
      run_cli(fmt::format("train {} --out {}", (dir / "c.yaml").string(), (dir / "mine").string()));
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("holds a config.yaml but no run"), std::string::npos) << e.err;
  EXPECT_EQ(io::read_file(dir / "mine" / "config.yaml"), "# my notes\ntrain:\n  lr: 0.5\n");
}

TEST(Reliability, ACheckpointWithAnotherVocabularyIsDetected) {
  TempDir dir;
  const fs::path ckpt = train_tiny_model(dir, 5);
  EXPECT_NO_THROW(run::read_checkpoint_info(ckpt));
  // Another SentencePiece model of the same size in place of the checkpoint's own.
  Config other = tiny_run_config(dir, 64);
  other.seed = 7;
  other.vocab.size = 41;
  other.vocab.cache_dir = (dir / "vocab2").string();
  train::TrainOptions o;
  o.run_dir = dir / "other";
  other.train.max_steps = 1;
  other.train.eval_every = 1;
  train::train_command(other, o);
  fs::copy_file(dir / "other" / "checkpoints" / "last" / "vocab" / "joint.model",
                ckpt / "vocab" / "joint.model", fs::copy_options::overwrite_existing);
  const std::string msg = error_of([&] { run::read_checkpoint_info(ckpt); });
  EXPECT_NE(msg.find("joint.model: differs from the vocabulary the weights were trained with"),
            std::string::npos)
      << msg;
}

TEST(Reliability, AnInterruptedRunExitsWithStatus3AndResumes) {
  TempDir dir;
  Config c = kill_test_config(dir);
  c.train.max_steps = 100000;
  c.train.eval_every = 100000;
  save_config(c, dir / "c.yaml");
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    execl(HEADCOUNT_BINARY, HEADCOUNT_BINARY, "train", (dir / "c.yaml").c_str(), "--out",
          (dir / "run").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Interrupt it once it is training (its first save_every checkpoint exists).
  for (int i = 0; i < 600 && !fs::exists(dir / "run" / "checkpoints" / "last"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kExitInterrupted);
  EXPECT_FALSE(fs::exists(dir / "run" / "summary.json"));
  EXPECT_TRUE(fs::exists(dir / "run" / "checkpoints" / "last" / "optimizer.pt"));
}

// Starts `headcount ARGS` in a process group of its own (as a shell starts a foreground job);
// returns its PID (= the group's id).
pid_t start_in_own_group(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    freopen(log.c_str(), "w", stderr);
    freopen("/dev/null", "w", stdout);
    std::vector<char*> argv = {const_cast<char*>(HEADCOUNT_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(HEADCOUNT_BINARY, argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

bool wait_for(const std::function<bool()>& cond, int seconds = 60) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::map<int64_t, int> train_event_counts(const fs::path& metrics) {
  std::map<int64_t, int> n;
  for (const auto& line : io::read_lines(metrics, {.allow_empty_file = true})) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") ++n[j["step"].get<int64_t>()];
  }
  return n;
}

// Ctrl-C on a terminal sends SIGINT to the sweep's process group: the runs save and stop (not
// FAILED), the sweep exits 3; a sweep killed outright takes its runs with it (they save too); a
// run another process is writing is not started twice.
TEST(Reliability, CtrlCOnASweepSavesEveryRunAndAKilledSweepLeavesNoOrphans) {
  TempDir dir;
  Config c = kill_test_config(dir);
  c.train.eval_every = 100000;
  c.train.max_steps = 100000;
  save_config(c, dir / "base.yaml");
  const auto write_sweep = [&](int steps) {
    io::write_file_atomic(dir / "s.yaml", fmt::format("command: train\nconfigs: [{}]\n"
                                                      "set: {{train.max_steps: {}}}\n"
                                                      "grid: {{seed: [1, 2]}}\n",
                                                      (dir / "base.yaml").string(), steps));
  };
  write_sweep(100000);
  const std::vector<std::string> args = {
      "sweep", (dir / "s.yaml").string(), "--out", (dir / "out").string(), "--workers", "2"};
  const fs::path runs[] = {dir / "out" / "seed-1", dir / "out" / "seed-2"};
  const auto both_saved = [&] {
    return fs::exists(runs[0] / "checkpoints" / "last") &&
           fs::exists(runs[1] / "checkpoints" / "last");
  };
  pid_t sweep = start_in_own_group(args, dir / "sweep1.log");
  ASSERT_TRUE(wait_for(both_saved)) << io::read_file(dir / "sweep1.log");
  // A second sweep on the same folder is refused.
  const Exit second =
      run_cli(fmt::format("sweep {} --out {}", (dir / "s.yaml").string(), (dir / "out").string()));
  EXPECT_EQ(second.code, 1);
  EXPECT_NE(second.err.find(fmt::format("PID {}", sweep)), std::string::npos) << second.err;
  kill(-sweep, SIGINT);  // the terminal's Ctrl-C: the whole foreground group
  int status = 0;
  waitpid(sweep, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << io::read_file(dir / "sweep1.log");
  EXPECT_EQ(WEXITSTATUS(status), kExitInterrupted) << io::read_file(dir / "sweep1.log");
  const std::string log1 = io::read_file(dir / "sweep1.log");
  EXPECT_EQ(log1.find("FAILED"), std::string::npos) << log1;
  for (const auto& run : runs) {
    const auto exit = nlohmann::json::parse(io::read_file(run / "sweep-exit.json"));
    EXPECT_EQ(exit["failed"], false) << exit.dump();
    EXPECT_EQ(exit["exit_code"], kExitInterrupted) << exit.dump();
    EXPECT_NE(io::read_file(run / "log.txt").find("interrupted at step"), std::string::npos);
    EXPECT_FALSE(io::RunLock::holder(run).has_value());
  }

  // Resumed, then killed outright: its runs get SIGTERM (parent-death signal), save and end.
  sweep = start_in_own_group(args, dir / "sweep2.log");
  ASSERT_TRUE(wait_for([&] {
    return io::RunLock::holder(runs[0]).has_value() && io::RunLock::holder(runs[1]).has_value();
  }));
  const auto steps_before =
      nlohmann::json::parse(io::read_file(runs[0] / "checkpoints" / "last" / "state.json"))["step"]
          .get<int64_t>();
  ASSERT_TRUE(wait_for([&] {
    return nlohmann::json::parse(
               io::read_file(runs[0] / "checkpoints" / "last" / "state.json"))["step"]
               .get<int64_t>() > steps_before;
  }));
  kill(sweep, SIGKILL);
  waitpid(sweep, nullptr, 0);
  EXPECT_TRUE(wait_for(
      [&] {
        return !io::RunLock::holder(runs[0]).has_value() &&
               !io::RunLock::holder(runs[1]).has_value();
      },
      30))
      << "a run outlived its sweep";

  // Finished with a small budget: every logged step once (no second writer ever appended).
  write_sweep(60);
  const Exit done =
      run_cli(fmt::format("sweep {} --out {}", (dir / "s.yaml").string(), (dir / "out").string()));
  ASSERT_EQ(done.code, 0) << done.err;
  for (const auto& run : runs) {
    ASSERT_TRUE(fs::exists(run / "summary.json"));
    for (const auto& [step, n] : train_event_counts(run / "metrics.jsonl"))
      EXPECT_EQ(n, 1) << run << " step " << step;
  }
}

}  // namespace
}  // namespace headcount
