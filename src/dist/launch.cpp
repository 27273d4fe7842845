#include "headcount/dist/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>

#include "headcount/common/check.h"
#include "headcount/common/process.h"
#include "headcount/common/runtime.h"
#include "headcount/common/signals.h"
#include "headcount/dist/distributed.h"

namespace headcount::dist {
namespace {

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of its stdout + stderr
  std::string pending;
  bool running = true;
  int code = 0;
};

void emit(int rank, const std::string& line) {
  std::fprintf(stderr, "[rank %d] %s\n", rank, line.c_str());
  std::fflush(stderr);
}

// Prints the complete lines of a child's output ('\r' ends a progress line).
void drain(Child& c, int rank, bool flush_all) {
  size_t start = 0;
  for (size_t i = 0; i < c.pending.size(); ++i) {
    if (c.pending[i] == '\n' || c.pending[i] == '\r') {
      if (i > start) emit(rank, c.pending.substr(start, i - start));
      start = i + 1;
    }
  }
  c.pending.erase(0, start);
  if (flush_all && !c.pending.empty()) {
    emit(rank, c.pending);
    c.pending.clear();
  }
}

// The processes of one launch and how far stopping them has gone.
struct Launch {
  std::vector<Child> children;
  int first_failure = 0;
  bool stopping = false;
  std::chrono::steady_clock::time_point stop_time = std::chrono::steady_clock::time_point::max();
  bool killed = false;

  // SIGTERM to every running process, once.
  void stop_all(const std::string& why) {
    if (stopping) return;
    stopping = true;
    std::fprintf(stderr, "[launch] %s; stopping the other processes\n", why.c_str());
    for (auto& c : children)
      if (c.running) kill(-c.pid, SIGTERM);
  }
};

// One process per rank, with the environment torch.distributed's launchers give.
std::vector<Child> start_children(const LaunchOptions& o, int port, int share) {
  std::vector<Child> children(o.nproc);
  for (int r = 0; r < o.nproc; ++r) {
    process::ChildOptions co;
    co.argv = {o.executable.string()};
    co.argv.insert(co.argv.end(), o.args.begin(), o.args.end());
    co.output_pipe = true;
    co.env = {{"RANK", std::to_string(r)},
              {"LOCAL_RANK", std::to_string(r)},
              {"WORLD_SIZE", std::to_string(o.nproc)},
              {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(port)},
              {"HEADCOUNT_NUM_CORES", std::to_string(share)}};
    const auto child = process::start(co);
    children[r].pid = child.pid;
    children[r].fd = child.output_fd;
  }
  return children;
}

// Prints what the processes wrote, waiting up to 200 ms for it.
void relay_output(std::vector<Child>& children) {
  std::vector<pollfd> pfds;
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(children.size()); ++r) {
    if (children[r].fd >= 0) {
      pfds.push_back({children[r].fd, POLLIN, 0});
      ranks.push_back(r);
    }
  }
  if (!pfds.empty()) poll(pfds.data(), pfds.size(), 200);
  for (size_t i = 0; i < pfds.size(); ++i) {
    if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Child& c = children[ranks[i]];
    char buf[4096];
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      c.pending.append(buf, static_cast<size_t>(n));
      drain(c, ranks[i], false);
    } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
      drain(c, ranks[i], true);
      ::close(c.fd);
      c.fd = -1;
    }
  }
}

// Collects the processes that exited; the first failure stops the others. Returns whether any
// is still running.
bool reap_exits(Launch& l) {
  bool any_running = false;
  for (int r = 0; r < static_cast<int>(l.children.size()); ++r) {
    Child& c = l.children[r];
    if (!c.running) continue;
    int status = 0;
    const pid_t got = waitpid(c.pid, &status, WNOHANG);
    if (got == c.pid) {
      c.running = false;
      c.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (c.code != 0 && !l.stopping) {
        l.first_failure = c.code;
        l.stop_all(WIFEXITED(status)
                       ? "rank " + std::to_string(r) + " exited with code " + std::to_string(c.code)
                       : "rank " + std::to_string(r) + " was killed by signal " +
                             std::to_string(WTERMSIG(status)));
        l.stop_time = std::chrono::steady_clock::now();
      }
    } else {
      any_running = true;
    }
  }
  return any_running;
}

// Every process has exited: prints what is left in the pipes (without waiting for anything they
// may have left running to close them) and kills what they left behind.
void finish_children(std::vector<Child>& children) {
  for (int r = 0; r < static_cast<int>(children.size()); ++r) {
    Child& c = children[r];
    if (c.fd < 0) continue;
    fcntl(c.fd, F_SETFL, O_NONBLOCK);
    char buf[4096];
    ssize_t n;
    while ((n = read(c.fd, buf, sizeof buf)) > 0) c.pending.append(buf, static_cast<size_t>(n));
    drain(c, r, true);
    ::close(c.fd);
    c.fd = -1;
  }
  for (auto& c : children) kill(-c.pid, SIGKILL);  // anything a process left behind
}

// SIGKILL to the processes still running the grace period after SIGTERM.
void kill_after_grace(const LaunchOptions& o, Launch& l) {
  const bool overdue = std::chrono::steady_clock::now() - l.stop_time >
                       std::chrono::duration<double>(o.grace_seconds);
  if (l.killed || !overdue) return;
  std::fprintf(stderr, "[launch] processes still running %.0f s after SIGTERM: killing them\n",
               o.grace_seconds);
  for (auto& c : l.children)
    if (c.running) kill(-c.pid, SIGKILL);
  l.killed = true;
}

}  // namespace

int launch(const LaunchOptions& o) {
  HC_CHECK(o.nproc >= 1, "--nproc must be at least 1");
  HC_CHECK(!o.args.empty(),
           "launch: give the headcount command to run after --, e.g. "
           "headcount launch --nproc 2 -- train CONFIG --out RUN");
  const int port = free_port();
  const int cores = o.cores > 0 ? o.cores : runtime::num_cores();
  const int share = std::max(1, cores / o.nproc);

  // A stop signal stops every process (SIGTERM, then SIGKILL after the grace period).
  const StopSignals stop_signals(StopSignals::Options{.restart = false, .exit_on = 0});

  std::fprintf(stderr,
               "[launch] %d processes, MASTER_ADDR=127.0.0.1 MASTER_PORT=%d, %d core(s) "
               "each\n",
               o.nproc, port, share);
  Launch l;
  l.children = start_children(o, port, share);
  while (true) {
    relay_output(l.children);
    const bool any_running = reap_exits(l);
    if (StopSignals::requested() && !l.stopping) {
      l.stop_all("interrupted");
      l.stop_time = std::chrono::steady_clock::now();
    }
    if (!any_running) {
      finish_children(l.children);
      break;
    }
    if (l.stopping) kill_after_grace(o, l);
  }
  if (l.first_failure == 0)
    for (const auto& c : l.children)
      if (c.code != 0) return c.code;
  return l.first_failure;
}

}  // namespace headcount::dist
