// headcount launch: N local processes of a headcount command with torchrun's environment.
#include <torch/cuda.h>

#include <cstdlib>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/log.h"
#include "headcount/common/runtime.h"
#include "headcount/dist/launch.h"

namespace headcount::cli {

void add_launch_command(CLI::App& app) {
  struct Args {
    int nproc = 2;
    int cores = 0;
    double grace = 10;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "launch",
      "Start N local processes of a headcount command for data-parallel training, with the "
      "environment torchrun sets: headcount launch --nproc 2 -- train CONFIG --out RUN");
  cmd->add_option("--nproc", a->nproc, "Processes")
      ->check(integer_in(1, 1024))
      ->capture_default_str();
  cmd->add_option("--cores", a->cores, "Cores to split between them (0: this machine's)")
      ->check(integer_in(0, 4096))
      ->capture_default_str();
  cmd->add_option("--grace", a->grace, "Seconds between SIGTERM and SIGKILL when stopping")
      ->check(number_in(0, 3600))
      ->capture_default_str();
  cmd->callback([a] {
    const std::vector<std::string>& rest = args_after_dash_dash();
    dist::LaunchOptions o;
    o.nproc = a->nproc;
    o.cores = a->cores;
    o.grace_seconds = a->grace;
    o.args = rest;
    o.executable = self_executable();
    const int code = dist::launch(o);
    if (code != 0) std::exit(code);
  });
}

void setup_distributed(const Config& config, train::TrainOptions& o, int timeout_s) {
  const auto env = dist::environment_from_env();
  if (!env.distributed()) return;
  if (env.rank != 0) log::set_level(log::Level::kWarn);  // rank 0 speaks for the group
  const auto resolved = runtime::resolve_device(config.device);
  const auto device = dist::process_device(
      resolved, env, resolved.is_cuda() ? static_cast<int64_t>(torch::cuda::device_count()) : 0);
  log::info("distributed: rank {} of {} ({} environment) on {} ({}), rendezvous at {}:{}", env.rank,
            env.world_size, env.source, device.str(), dist::backend_for(device), env.master_addr,
            env.master_port);
  o.comm = dist::connect(env, device, std::chrono::seconds(timeout_s));
  o.device = device;
  o.rank = env.rank;
  o.world_size = env.world_size;
}

}  // namespace headcount::cli
