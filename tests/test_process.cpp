// process::start / run (include/headcount/common/process.h): the one way children are started.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

#include "headcount/common/io.h"
#include "headcount/common/process.h"
#include "test_util.h"

namespace headcount {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(Process, ExitCodesEnvironmentAndOutputFile) {
  TempDir dir;
  const fs::path log = dir / "log.txt";
  process::ChildOptions o;
  o.argv = {"sh", "-c", "echo out $HC_TEST_VALUE; echo err >&2; read x; echo read:$x; exit 3"};
  o.env = {{"HC_TEST_VALUE", "42"}};
  o.output_file = log;
  o.stdin_null = true;
  EXPECT_EQ(process::run(o), 3);
  EXPECT_EQ(process::run(o), 3);  // appended, not overwritten
  EXPECT_EQ(io::read_file(log), "out 42\nerr\nread:\nout 42\nerr\nread:\n");
  o.argv = {"/nonexistent/program"};
  EXPECT_EQ(process::run(o), 127);
  EXPECT_NE(io::read_file(log).find("cannot run /nonexistent/program"), std::string::npos);
}

TEST(Process, PipeAndOwnProcessGroup) {
  process::ChildOptions o;
  // (/proc/PID/stat field 5: the process group)
  o.argv = {"sh", "-c", "echo pgid $(cut -d' ' -f5 /proc/$$/stat) pid $$"};
  o.output_pipe = true;
  const auto c = process::start(o);
  ASSERT_GE(c.output_fd, 0);
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(c.output_fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(c.output_fd);
  EXPECT_EQ(process::wait_exit_code(c.pid), 0);
  // The child leads its own process group: its group id is its pid.
  EXPECT_EQ(text, fmt::format("pgid {} pid {}\n", c.pid, c.pid));
}

TEST(Process, AKilledChildReadsAsMinusOne) {
  process::ChildOptions o;
  o.argv = {"sleep", "30"};
  const auto c = process::start(o);
  kill(c.pid, SIGKILL);
  EXPECT_EQ(process::wait_exit_code(c.pid), -1);
}

}  // namespace
}  // namespace headcount
