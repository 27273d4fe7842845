// The test binary's main: like the CLI, it first replaces a fallback OpenBLAS kernel set that
// OpenBLAS chose for a CPU it does not know (README, "Threads and BLAS"), so that the tests run
// the kernels headcount itself runs there; then GoogleTest.
#include <gtest/gtest.h>

#include "headcount/common/runtime.h"

int main(int argc, char** argv) {
  headcount::runtime::restart_with_better_blas_kernels(argv);  // may re-execute the binary
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
