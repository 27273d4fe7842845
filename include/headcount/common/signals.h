// The one place that handles SIGINT and SIGTERM: the training loop, the sweep runner and the
// launcher hold a StopSignals while they work, so that a stop request is counted (and acted on
// at a safe point) instead of killing the process, and the previous handlers come back after.
#pragma once

#include <memory>

namespace headcount {

class StopSignals {
 public:
  struct Options {
    // Restart interrupted system calls (file and socket I/O in a training step); off where a
    // blocking wait must return on the signal (a sweep's waitpid).
    bool restart = true;
    // Exit at once with status 130 on this many signals (0: never): a second Ctrl-C stops a
    // training run without waiting for its step.
    int exit_on = 0;
  };
  StopSignals() : StopSignals(Options{}) {}
  explicit StopSignals(const Options& options);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Signals received since the innermost StopSignals was made.
  static int count();
  static bool requested() { return count() > 0; }
  // Counts a request that came another way (e.g. from another process of a data-parallel run).
  static void request();

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;  // the handlers to restore
};

}  // namespace headcount
