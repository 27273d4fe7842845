// headcount bench: measured figures of this machine (BLAS speed, thread settings).
#include <cstdio>

#include "commands.h"
#include "headcount/common/runtime.h"

namespace headcount::cli {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks: BLAS speed and thread settings");
  cmd->require_subcommand(1);
  auto* blas = cmd->add_subcommand("blas", "Identify the BLAS and measure its matmul speed");
  blas->callback([] {
    const auto b = runtime::probe_blas();
    std::printf("BLAS: %s\nlibrary: %s\nsgemm 384x384: %.1f GFLOP/s%s\n", b.vendor.c_str(),
                b.library.c_str(), b.gflops,
                b.slow ? "  (SLOW: install libopenblas0-pthread)" : "");
  });
}

}  // namespace headcount::cli
