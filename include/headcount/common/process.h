// The one place that starts child processes (sweep runs, the launcher's ranks, the analyses a
// report runs). A child runs in its own process group (a signal to the group reaches what it
// started too; a terminal's Ctrl-C reaches the parent alone, which decides what to pass on) with
// the default SIGINT/SIGTERM handling.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace headcount::process {

namespace fs = std::filesystem;

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up on PATH
  // Standard output and error: appended to this file, or (output_pipe) sent to a pipe whose read
  // end Child::output_fd is; otherwise inherited.
  std::optional<fs::path> output_file;
  bool output_pipe = false;
  bool stdin_null = false;                               // standard input from /dev/null
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
  bool die_with_parent = false;  // SIGTERM to the child when the parent dies
};

struct Child {
  pid_t pid = -1;
  int output_fd = -1;  // with output_pipe: the read end (the caller closes it)
};

// Errors name the program when the process cannot be started; a program that cannot be run
// exits with 127 after saying so on its standard error.
Child start(const ChildOptions& options);

// Waits for `pid` (through signals); its exit status, or -1 when it was killed.
int wait_exit_code(pid_t pid);

// start() then wait_exit_code().
int run(const ChildOptions& options);

}  // namespace headcount::process
