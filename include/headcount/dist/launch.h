// `headcount launch --nproc N -- COMMAND...`: N local processes of headcount with the environment
// torchrun gives (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT on a
// free port), their output prefixed with the rank, the cores split between them
// (HEADCOUNT_NUM_CORES), and all of them stopped when one fails.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace headcount::dist {

struct LaunchOptions {
  int nproc = 2;
  std::filesystem::path executable;  // started as `executable args...`
  std::vector<std::string> args;
  int cores = 0;              // split between the processes; 0 = this machine's cores
  double grace_seconds = 10;  // after SIGTERM, before SIGKILL
};

// Runs the processes to the end; returns 0 when all succeeded, else the first failure's exit
// code (128 + signal for a process killed by a signal).
int launch(const LaunchOptions& options);

}  // namespace headcount::dist
