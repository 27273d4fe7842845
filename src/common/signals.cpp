#include "headcount/common/signals.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace headcount {
namespace {

std::atomic<int> g_count{0};
std::atomic<int> g_exit_on{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free counter");

extern "C" void on_stop_signal(int) {
  const int n = g_count.fetch_add(1) + 1;
  const int exit_on = g_exit_on.load();
  if (exit_on > 0 && n >= exit_on) std::_Exit(130);
}

}  // namespace

struct StopSignals::Saved {
  struct sigaction old_int {};
  struct sigaction old_term {};
};

StopSignals::StopSignals(const Options& options) {
  g_count = 0;
  g_exit_on = options.exit_on;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = options.restart ? SA_RESTART : 0;
  saved_ = std::make_unique<Saved>();
  sigaction(SIGINT, &sa, &saved_->old_int);
  sigaction(SIGTERM, &sa, &saved_->old_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &saved_->old_int, nullptr);
  sigaction(SIGTERM, &saved_->old_term, nullptr);
  g_exit_on = 0;
}

int StopSignals::count() {
  return g_count.load();
}

void StopSignals::request() {
  if (g_count.load() == 0) g_count.fetch_add(1);
}

}  // namespace headcount
