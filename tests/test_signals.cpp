// StopSignals (include/headcount/common/signals.h): the one SIGINT/SIGTERM handler.
#include <gtest/gtest.h>

#include <csignal>

#include "headcount/common/signals.h"

namespace headcount {
namespace {

volatile std::sig_atomic_t g_outer = 0;
extern "C" void outer_handler(int) {
  g_outer = g_outer + 1;
}

TEST(Signals, StopSignalsCountsAndRestoresThePreviousHandlers) {
  struct sigaction sa {
  }, before{};
  sa.sa_handler = outer_handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &before);
  sigaction(SIGTERM, &sa, nullptr);
  g_outer = 0;
  {
    const StopSignals stop;
    EXPECT_FALSE(StopSignals::requested());
    std::raise(SIGINT);
    EXPECT_EQ(StopSignals::count(), 1);
    std::raise(SIGTERM);
    EXPECT_EQ(StopSignals::count(), 2);
    EXPECT_EQ(g_outer, 0);  // the outer handler saw nothing while StopSignals held them
  }
  {
    const StopSignals again;  // a new holder starts from zero
    EXPECT_EQ(StopSignals::count(), 0);
    StopSignals::request();
    StopSignals::request();  // a request counts once
    EXPECT_EQ(StopSignals::count(), 1);
  }
  std::raise(SIGINT);
  std::raise(SIGTERM);
  EXPECT_EQ(g_outer, 2);  // back to the outer handler
  sigaction(SIGINT, &before, nullptr);
  signal(SIGTERM, SIG_DFL);
}

TEST(Signals, TheNthSignalExitsAtOnceWith130) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const StopSignals stop(StopSignals::Options{.restart = true, .exit_on = 2});
        std::raise(SIGINT);  // counted
        std::raise(SIGINT);  // exits
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "");
}

}  // namespace
}  // namespace headcount
