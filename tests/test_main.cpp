// The test binary's main: like the CLI, it first replaces a fallback OpenBLAS kernel set that
// OpenBLAS chose for a CPU it does not know (README, "Threads and BLAS"), so that the tests run
// the kernels headcount itself runs there; then GoogleTest. A test that dies of a fatal signal
// prints the signal and the stack it died on (function names where the symbols are exported)
// before it dies as it would have: on a machine where tests crash (the GPU builds of 2026-11-27),
// the log says where.
#include <execinfo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "headcount/common/runtime.h"

namespace {

void print_stack_and_die(int sig) {
  // Only async-signal-safe calls: write, backtrace (preloaded in main), backtrace_symbols_fd.
  const char* name = strsignal(sig);
  const char head[] = "\n[headcount_tests] fatal signal: ";
  (void)!write(STDERR_FILENO, head, sizeof(head) - 1);
  (void)!write(STDERR_FILENO, name, std::strlen(name));
  (void)!write(STDERR_FILENO, "; stack:\n", 9);
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  headcount::runtime::restart_with_better_blas_kernels(argv);  // may re-execute the binary
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, print_stack_and_die);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
