// Training: label-smoothed cross-entropy, Adam with warm-up and inverse square root decay,
// token-based batches, gradient accumulation and clipping, dev loss and BLEU every N steps,
// last / best / step-N checkpoints, early stopping, metrics.jsonl and a progress line, and exact
// resumption after an interruption.
//
// Data-parallel training over several processes fits in without changing the loop: gradients are
// summed (not averaged) over the accumulated batches and scaled by the global token count just
// before the optimizer step, which is where an all-reduce of gradients and token counts goes;
// batches are assigned to ranks by position in the epoch order; only rank 0 writes.
#pragma once

#include <torch/optim/adam.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/common/config.h"
#include "headcount/common/precision.h"
#include "headcount/common/run_guard.h"
#include "headcount/data/batching.h"
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"
#include "headcount/dist/distributed.h"
#include "headcount/model/transformer.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/run_folder.h"
#include "headcount/train/extension.h"
#include "headcount/train/inputs.h"

namespace headcount::train {

namespace fs = std::filesystem;

struct TrainSummary {
  int64_t steps = 0;
  double best_score = 0;
  int64_t best_step = -1;
  bool early_stopped = false;
  bool interrupted = false;
  double seconds = 0;
  double target_tokens_per_second = 0;
};

// The loop (Trainer::run) reads top to bottom: start or resume, then per step take the step's
// batches, forward and backward them, add the extension's regulariser, all-reduce, clip, set the
// learning rate and step the optimizer; log, evaluate and checkpoint when due; finish. Everything
// a fine-tuning method adds comes through one TrainingExtension (train/extension.h).
class Trainer {
 public:
  Trainer(Config config, TrainOptions options,
          std::unique_ptr<TrainingExtension> extension = nullptr);
  ~Trainer();
  // Loads data, vocabulary and model, then builds the optimizer (run() and evaluate() call it).
  void init();
  TrainSummary run();
  // Dev loss (teacher-forced, whole dev set), BLEU and chrF (decoded, train.eval_max_sentences).
  EvalResult evaluate();

  model::Transformer& model() {
    init();
    return inputs_.model;
  }
  const Config& config() const { return config_; }
  const TrainOptions& options() const { return options_; }
  run::RunFolder folder() const { return {options_.run_dir}; }
  const run::TrainState& state() const { return state_; }
  const data::VocabFiles& vocab_files() const { return inputs_.vocab_files; }
  // Appends a record to metrics.jsonl (rank 0).
  void log_metrics(const nlohmann::json& record);

 private:
  // Statistics of one optimizer step, summed over the processes.
  struct StepStats {
    int64_t tokens = 0;
    double loss = 0, nll = 0;  // sums over the step's target tokens
    double lr = 0;
    bool stop = false;  // a process was asked to stop (SIGINT / SIGTERM)
  };
  class Progress;

  // The named steps of run().
  void start_or_resume();
  void log_run_start();
  void broadcast_parameters();
  bool epoch_done() const;
  void next_epoch();
  StepStats train_step();
  void accumulate_batches(StepStats& s);
  void synchronise_stats(StepStats& s);
  void apply_update(StepStats& s);
  void evaluate_and_checkpoint(Progress& progress);
  void save_last(Progress& progress);
  int64_t check_parameters_identical();
  // train.max_steps, or the earlier end the extension set (prune.exact_recovery).
  int64_t end_step() const;
  void run_steps(TrainSummary& summary, Progress& progress);
  void finish_run(TrainSummary& summary, Progress& progress);
  void write_summary(const TrainSummary& summary, double seconds, int64_t differing);

  std::vector<std::string> event_logs() const;
  void save(const fs::path& dir);
  void resume_from(const fs::path& dir);
  // On resume: the training files and the vocabulary are the ones the checkpoint recorded (a
  // replaced vocabulary cache or an edited corpus would give the old weights other token ids or
  // other data); errors name both hashes and what to do.
  void check_same_inputs(const run::CheckpointInfo& info) const;
  // On resume, before sync_checkpoint_set (which would copy and delete by them): no step-N is
  // later than `last`.
  void check_step_checkpoints() const;
  // On resume, after sync_checkpoint_set: `best` holds the best step `last` records.
  void check_best_checkpoint() const;
  // The epoch position of a resumed state against the batches of this run's epoch.
  void check_batch_position(const run::CheckpointInfo& info) const;
  // An error when a loss is NaN or infinite (a diverged run), before anything is saved.
  void check_finite(const char* what, double value) const;
  // Makes `best` and `step-N` agree with `last` (written first by every save): after a save of an
  // evaluation, and on resume, where a kill between the writes left them behind.
  void sync_checkpoint_set(bool evaluated);

  Config config_;
  TrainOptions options_;
  TrainingInputs inputs_;  // device, precision, corpus, vocabulary, examples, model
  run::TrainState state_;
  std::unique_ptr<TrainingExtension> extension_;
  std::vector<ParamGroup> groups_;
  std::vector<torch::Tensor> params_;       // all trained parameters, in group order
  std::vector<torch::Tensor> clip_params_;  // those train.clip_norm clips: clipped_parameters
  std::vector<std::vector<int64_t>> batches_;
  std::vector<int64_t> order_;  // this epoch's batch order
  int64_t order_epoch_ = -1;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  bool ready_ = false;
  int64_t last_saved_step_ = 0;
  int64_t allreduce_bytes_ = 0;  // sent by this process in the last step's gradient all-reduce
};

// The config keys a resumed run may change (logged): the budget and schedule (train.*, but for
// train.best_metric, the scale of the recorded best score), threads.*, decode.*, device. The
// sweep applies the same rule to a sweep file given again on its runs.
bool resume_may_change(const std::string& key);
// Before starting or resuming `run_dir`: takes its lock (rank 0; held until the returned object
// goes: a second process on the folder is an error naming the first one's PID), removes
// temporaries left by dead processes, and refuses a config whose model, data, vocabulary, seed or
// pruning settings differ from the run's own (train.*, threads.*, decode.* and device may change),
// and a folder that holds something other than a run (the user's own config.yaml included).
[[nodiscard]] io::RunLock check_run_folder(const Config& config, const fs::path& run_dir,
                                           int rank = 0);

// `headcount train`: starts a run in `run_dir`, or resumes it from its `last` checkpoint.
TrainSummary train_command(const Config& config, const TrainOptions& options);

}  // namespace headcount::train
