#include "headcount/common/process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "headcount/common/check.h"

namespace headcount::process {

Child start(const ChildOptions& o) {
  HC_CHECK(!o.argv.empty(), "start a process: no program given");
  // Everything the child needs is made before fork: after it, only system calls.
  std::vector<std::string> argv_s = o.argv;
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string output = o.output_file ? o.output_file->string() : "";
  int fds[2] = {-1, -1};
  if (o.output_pipe) HC_CHECK(pipe(fds) == 0, "cannot create a pipe for {}", o.argv[0]);
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  HC_CHECK(pid >= 0, "cannot start a process ({})", o.argv[0]);
  if (pid == 0) {
    setpgid(0, 0);
    if (o.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(128 + SIGTERM);  // the parent died before prctl
    }
    if (o.output_pipe) {
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
    } else if (o.output_file) {
      const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
    }
    if (o.stdin_null) {
      const int null_in = ::open("/dev/null", O_RDONLY);
      if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    }
    for (const auto& [k, v] : o.env) setenv(k.c_str(), v.c_str(), 1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "headcount: cannot run %s\n", argv[0]);
    _exit(127);
  }
  setpgid(pid, pid);  // (also in the child: whichever runs first)
  Child c;
  c.pid = pid;
  if (o.output_pipe) {
    ::close(fds[1]);
    c.output_fd = fds[0];
  }
  return c;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int run(const ChildOptions& options) {
  return wait_exit_code(start(options).pid);
}

}  // namespace headcount::process
