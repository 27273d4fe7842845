// Data-parallel training over c10d/Gloo: environment, launcher, equivalence with one process,
// a peer's death, and resuming with another number of processes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/dist/distributed.h"
#include "headcount/dist/launch.h"
#include "headcount/run/checkpoint.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::TempDir;

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  void set(const std::string& name, const std::string& value) {
    save(name);
    setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    save(name);
    unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
  }

 private:
  void save(const std::string& name) {
    for (const auto& s : saved_)
      if (s.first == name) return;
    const char* v = std::getenv(name.c_str());
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

const char* const kDistVars[] = {"RANK",        "WORLD_SIZE",   "LOCAL_RANK",   "MASTER_ADDR",
                                 "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

TEST(Distributed, EnvironmentAsTorchrunAndSlurmSetIt) {
  ScopedEnv e;
  for (const char* v : kDistVars) e.unset(v);
  auto one = dist::environment_from_env();
  EXPECT_FALSE(one.distributed());
  EXPECT_EQ(one.rank, 0);

  e.set("SLURM_NTASKS", "4");
  e.set("SLURM_PROCID", "3");
  e.set("SLURM_LOCALID", "1");
  e.set("MASTER_ADDR", "node7");
  auto slurm = dist::environment_from_env();
  EXPECT_EQ(slurm.source, "slurm");
  EXPECT_EQ(slurm.world_size, 4);
  EXPECT_EQ(slurm.rank, 3);
  EXPECT_EQ(slurm.local_rank, 1);
  EXPECT_EQ(slurm.master_addr, "node7");

  // torchrun's variables win over Slurm's.
  e.set("WORLD_SIZE", "2");
  e.set("RANK", "1");
  e.set("LOCAL_RANK", "1");
  e.set("MASTER_PORT", "29511");
  auto tr = dist::environment_from_env();
  EXPECT_EQ(tr.source, "torchrun");
  EXPECT_EQ(tr.world_size, 2);
  EXPECT_EQ(tr.rank, 1);
  EXPECT_EQ(tr.master_port, 29511);

  auto error = [] {
    try {
      dist::environment_from_env();
    } catch (const Error& ex) {
      return std::string(ex.what());
    }
    return std::string();
  };
  e.set("RANK", "two");
  EXPECT_NE(error().find("RANK='two'"), std::string::npos);
  e.set("RANK", "2");
  EXPECT_NE(error().find("rank 2 is not below the world size 2"), std::string::npos);
  e.set("RANK", "0");
  e.set("MASTER_PORT", "70000");
  EXPECT_NE(error().find("MASTER_PORT=70000"), std::string::npos);
}

// One GPU per process on CUDA: cuda:LOCAL_RANK, or cuda:0 where each process sees one GPU.
TEST(Distributed, EachProcessTrainsOnTheGpuOfItsLocalRank) {
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA);
  dist::Environment one;
  dist::Environment rank3;
  rank3.world_size = 8;
  rank3.rank = 7;
  rank3.local_rank = 3;
  rank3.source = "torchrun";
  EXPECT_EQ(dist::process_device(cpu, rank3, 4), cpu);
  EXPECT_EQ(dist::process_device(cuda, rank3, 4), torch::Device(torch::kCUDA, 3));
  EXPECT_EQ(dist::process_device(cuda, rank3, 1), torch::Device(torch::kCUDA, 0));
  // One process keeps what the config asked for.
  EXPECT_EQ(dist::process_device(cuda, one, 4), cuda);
  EXPECT_EQ(dist::process_device(torch::Device(torch::kCUDA, 2), one, 4),
            torch::Device(torch::kCUDA, 2));
  EXPECT_NE(testing::error_of([&] {
              dist::process_device(cuda, rank3, 2);
            }).find("local rank 3 (torchrun environment) but this process sees 2 CUDA device(s)"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              dist::process_device(torch::Device(torch::kCUDA, 1), rank3, 4);
            }).find("device: cuda:1 puts every process of a data-parallel run on one GPU"),
            std::string::npos);
}

// Without the backend a device needs, connect() refuses at once, before any rendezvous.
TEST(Distributed, ADeviceWithoutItsProcessGroupIsRefusedAtOnce) {
  dist::Environment e;
  e.world_size = 2;
  e.master_port = dist::free_port();
  for (const torch::Device d : {torch::Device(torch::kCPU), torch::Device(torch::kCUDA, 0)}) {
    if (!dist::backend_for(d).empty()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const auto msg = testing::error_of([&] { dist::connect(e, d, std::chrono::seconds(30)); });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    EXPECT_NE(msg.find(d.is_cuda() ? "distributed training on CUDA needs a LibTorch built with NCCL"
                                   : "needs LibTorch's Gloo process group"),
              std::string::npos)
        << msg;
  }
}

TEST(Distributed, LauncherStopsEveryProcessWhenOneFails) {
  dist::LaunchOptions o;
  o.nproc = 2;
  o.executable = "/bin/sh";
  // Rank 1 fails at once; rank 0 would sleep for a minute.
  o.args = {"-c",
            "if [ \"$RANK\" = 1 ]; then echo rank one fails; exit 3; fi; "
            "echo \"world $WORLD_SIZE port $MASTER_PORT\"; sleep 60"};
  o.grace_seconds = 2;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(dist::launch(o), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  // Every process sees the torchrun environment.
  o.args = {"-c",
            "test \"$WORLD_SIZE\" = 2 && test \"$LOCAL_RANK\" = \"$RANK\" && "
            "test -n \"$MASTER_PORT\" && test \"$MASTER_ADDR\" = 127.0.0.1"};
  EXPECT_EQ(dist::launch(o), 0);
}

// Data-parallel training on the CPU needs LibTorch's Gloo group (the official wheels lack it).
#define SKIP_WITHOUT_GLOO()                   \
  if (dist::backend_for(torch::kCPU).empty()) \
  GTEST_SKIP() << "this LibTorch has no Gloo process group"

fs::path tiny_dist_config(const TempDir& dir, int steps) {
  Config c = tiny_run_config(dir, 64);
  // Gloo on the CPU, also where a GPU is there: several processes on one GPU is no NCCL set-up.
  c.device = "cpu";
  c.model.dropout = 0.1;  // per-batch seeds make it the same in both set-ups
  c.train.max_steps = steps;
  c.train.eval_every = steps;
  c.train.log_every = 1;
  c.train.max_tokens = 128;
  save_config(c, dir / "cfg.yaml");
  return dir / "cfg.yaml";
}

int run(const std::string& cmd) {
  return std::system(cmd.c_str());
}

// `launch --nproc 1` (torchrun's WORLD_SIZE=1) forms a group of one, as PyTorch's DDP does: the
// same collectives as with many processes (the GPU check runs it over NCCL), the same result as
// a plain run.
TEST(Distributed, ALaunchOfOneProcessFormsAGroupOfOne) {
  SKIP_WITHOUT_GLOO();
  TempDir dir;
  const auto cfg = tiny_dist_config(dir, 4);
  const std::string bin = HEADCOUNT_BINARY;
  ASSERT_EQ(run(fmt::format("{} launch --nproc 1 -- train {} --out {} > {} 2>&1", bin, cfg.string(),
                            (dir / "one").string(), (dir / "one.log").string())),
            0)
      << io::read_file(dir / "one.log");
  const auto log = io::read_file(dir / "one.log");
  EXPECT_NE(log.find("rank 0 of 1"), std::string::npos) << log;
  EXPECT_NE(log.find("(gloo)"), std::string::npos) << log;
  EXPECT_NE(log.find("parameters identical on all 1 processes"), std::string::npos) << log;
  const auto summary = nlohmann::json::parse(io::read_file(dir / "one" / "summary.json"));
  EXPECT_EQ(summary["world_size"], 1);
  EXPECT_EQ(summary["steps"], 4);
}

// Two processes (one batch each per step) against one process that takes both batches of a step
// (update_freq 2): the same global batches, so the same parameters.
TEST(Distributed, TwoProcessesMatchOneProcessOnTheSameGlobalBatches) {
  SKIP_WITHOUT_GLOO();
  TempDir dir;
  const auto cfg = tiny_dist_config(dir, 12);
  const std::string bin = HEADCOUNT_BINARY;
  ASSERT_EQ(run(fmt::format("{} launch --nproc 2 -- train {} --out {} > {} 2>&1", bin, cfg.string(),
                            (dir / "two").string(), (dir / "two.log").string())),
            0)
      << io::read_file(dir / "two.log");
  ASSERT_EQ(run(fmt::format("{} train {} --set train.update_freq=2 --out {} > {} 2>&1", bin,
                            cfg.string(), (dir / "one").string(), (dir / "one.log").string())),
            0)
      << io::read_file(dir / "one.log");
  const auto two_summary = nlohmann::json::parse(io::read_file(dir / "two" / "summary.json"));
  EXPECT_EQ(two_summary["world_size"], 2);
  EXPECT_EQ(two_summary["parameters_identical_across_processes"], true);
  EXPECT_EQ(two_summary["steps"], 12);
  const auto log = io::read_file(dir / "two.log");
  EXPECT_NE(log.find("[rank 0]"), std::string::npos);
  EXPECT_NE(log.find("parameters identical on all 2 processes"), std::string::npos);

  const auto a = run::load_weights_file(dir / "two" / "checkpoints" / "last" / "model.pt");
  std::map<std::string, torch::Tensor> b;
  for (const auto& [name, t] :
       run::load_weights_file(dir / "one" / "checkpoints" / "last" / "model.pt"))
    b[name] = t;
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  double max_diff = 0;
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    max_diff = std::max(max_diff, (t - b.at(name)).abs().max().item<double>());
  }
  EXPECT_LT(max_diff, 1e-4);
  // The training loss curves agree step by step.
  std::vector<double> la, lb;
  for (const auto& line : io::read_lines(dir / "two" / "metrics.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") {
      la.push_back(j["loss"]);
      EXPECT_GT(j["allreduce_bytes_per_step"].get<int64_t>(), 0);
    }
  }
  for (const auto& line : io::read_lines(dir / "one" / "metrics.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") lb.push_back(j["loss"]);
  }
  ASSERT_EQ(la.size(), 12u);
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-4) << "step " << i + 1;

  // Resuming the two-process run with one process (and more steps) works.
  ASSERT_EQ(run(fmt::format("{} train {} --set train.max_steps=16 --out {} > {} 2>&1", bin,
                            cfg.string(), (dir / "two").string(), (dir / "resume.log").string())),
            0)
      << io::read_file(dir / "resume.log");
  const auto resumed = nlohmann::json::parse(io::read_file(dir / "two" / "summary.json"));
  EXPECT_EQ(resumed["steps"], 16);
  EXPECT_FALSE(resumed.contains("world_size"));
}

// A process killed mid-run: its peer stops with a clear error instead of hanging.
TEST(Distributed, APeerKilledMidRunStopsTheOtherWithAClearError) {
  SKIP_WITHOUT_GLOO();
  TempDir dir;
  const auto cfg = tiny_dist_config(dir, 100000);
  const int port = dist::free_port();
  auto start = [&](int rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", "2", 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      const std::string log = (dir / fmt::format("rank{}.log", rank)).string();
      freopen(log.c_str(), "w", stderr);
      freopen("/dev/null", "w", stdout);
      execl(HEADCOUNT_BINARY, HEADCOUNT_BINARY, "train", cfg.c_str(), "--dist-timeout", "30",
            "--out", (dir / "run").c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  };
  const pid_t r0 = start(0);
  const pid_t r1 = start(1);
  // Wait until they train (a metrics line beyond the start), then kill rank 1.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    if (fs::exists(dir / "run" / "metrics.jsonl", ec) &&
        io::read_file(dir / "run" / "metrics.jsonl").find("\"train\"") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(r1, SIGKILL);
  int status = 0;
  waitpid(r1, &status, 0);
  const auto t0 = std::chrono::steady_clock::now();
  waitpid(r0, &status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(45));
  const auto log = io::read_file(dir / "rank0.log");
  ASSERT_TRUE(WIFEXITED(status)) << "rank 0 ended by signal " << WTERMSIG(status) << ":\n"
                                 << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(log.find("a peer stopped or cannot be reached"), std::string::npos) << log;
}

// Nobody serves the rendezvous: a clear error after the timeout, not a hang.
TEST(Distributed, RendezvousWithoutPeersFailsClearly) {
  SKIP_WITHOUT_GLOO();
  TempDir dir;
  const auto cfg = tiny_dist_config(dir, 4);
  const std::string cmd = fmt::format(
      "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} {} train {} --dist-timeout 3 "
      "--out {} 2>&1",
      dist::free_port(), HEADCOUNT_BINARY, cfg.string(), (dir / "run").string());
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) text += buf;
  EXPECT_NE(pclose(p), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_NE(text.find("distributed rendezvous failed (rank 1 of 2"), std::string::npos) << text;
}

}  // namespace
}  // namespace headcount
