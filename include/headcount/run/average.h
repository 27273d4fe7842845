// Checkpoint averaging (as fairseq's average_checkpoints.py and Marian's --average do): the
// element-wise mean of the weights of several checkpoints of one model, e.g. the last few of a
// fine-tuning run, written as a new checkpoint for `eval`, `translate` or `train --init-from`.
#pragma once

#include <filesystem>
#include <vector>

#include "headcount/model/architecture.h"

namespace headcount::run {

namespace fs = std::filesystem;

struct AveragedCheckpoint {
  model::Architecture architecture;
  int64_t step = 0;            // the newest input's step: the output's state
  std::vector<int64_t> steps;  // each input's step, in the order given
};

// Writes to `out` (a new or empty folder) a checkpoint whose every floating-point weight is the
// mean of the inputs' (accumulated in double, stored in the weight's own type); the newest input
// (the highest step) gives the training state, the config and the vocabulary; `averaged.json`
// records the inputs. Inputs must be ungated checkpoints of one model: the same architecture, the
// same vocabulary, the same weight names and shapes; anything else is an error naming the input
// and what differs. No optimizer state is written (training from it starts a fresh one).
AveragedCheckpoint average_checkpoints(const std::vector<fs::path>& checkpoints,
                                       const fs::path& out);

// The `count` step-N checkpoints of run folder `run_dir` with the highest steps, oldest first; an
// error when it keeps fewer (train.keep_last says how many a run keeps).
std::vector<fs::path> last_step_checkpoints(const fs::path& run_dir, int count);

}  // namespace headcount::run
