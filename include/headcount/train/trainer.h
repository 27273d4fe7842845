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
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"
#include "headcount/dist/distributed.h"
#include "headcount/model/transformer.h"
#include "headcount/train/batching.h"
#include "headcount/train/checkpoint.h"

namespace headcount::train {

namespace fs = std::filesystem;

struct TrainOptions {
  fs::path run_dir;
  // Train this checkpoint's architecture (e.g. a pruned one) from a random initialisation.
  std::optional<fs::path> architecture_from;
  // Start from this checkpoint's weights, architecture and vocabulary (fine-tuning).
  std::optional<fs::path> init_from;
  int rank = 0;        // this process
  int world_size = 1;  // processes
  // Data-parallel training: gradients are summed across the group before each optimizer step
  // (null: one process).
  std::shared_ptr<dist::Communicator> comm;
};

struct TrainSummary {
  int64_t steps = 0;
  double best_score = 0;
  int64_t best_step = -1;
  bool early_stopped = false;
  bool interrupted = false;
  double seconds = 0;
  double target_tokens_per_second = 0;
};

struct EvalResult {
  double loss = 0, nll = 0;  // per target token
  double bleu = 0, chrf = 0;
  int64_t sentences = 0;
  std::string bleu_signature;
};

// Subword-encoded pairs; pairs longer than `max_len` on a side are dropped and counted.
std::vector<Example> encode_pairs(const data::ParallelText& text, const data::Vocab& src,
                                  const data::Vocab& tgt, int max_len, size_t* dropped = nullptr);

class Trainer {
 public:
  Trainer(Config config, TrainOptions options);
  virtual ~Trainer();
  // Loads data, vocabulary and model, then builds the optimizer (run() and evaluate() call it).
  void init();
  TrainSummary run();
  EvalResult evaluate();

  model::Transformer& model() {
    init();
    return model_;
  }
  const Config& config() const { return config_; }

 protected:
  // Hooks for fine-tuning variants (pruning adds gates and a penalty through these).
  // The optimizer's parameter groups (default: one group of trainable_parameters()) and the
  // learning rate of each given the scheduled one.
  virtual std::vector<torch::optim::OptimizerParamGroup> parameter_groups();
  virtual double group_lr(size_t group, double scheduled_lr) { return scheduled_lr; }
  // Event logs in the run folder trimmed back to the checkpoint's step on resume.
  virtual std::vector<std::string> event_logs() const { return {"metrics.jsonl"}; }
  // After the model exists and before the optimizer is built.
  virtual void on_model_ready() {}
  virtual std::vector<torch::Tensor> trainable_parameters();
  // Added to the per-token training loss; undefined: nothing.
  virtual torch::Tensor extra_loss(int64_t step) { return {}; }
  // Called before each training forward pass (gates draw their noise here).
  virtual void before_forward(const Batch& batch) {}
  // Called after the optimizer step (Lagrange multipliers step here).
  virtual void after_step(int64_t step) {}
  // Evaluation runs between these two (gates switch to their deterministic values).
  virtual void before_evaluate() {}
  virtual void after_evaluate() {}
  virtual void on_evaluation(int64_t step, nlohmann::json& record) {}
  // Extra files of a checkpoint (written into the folder before it is swapped into place).
  virtual void save_extra(const fs::path& dir) {}
  virtual void load_extra(const fs::path& dir) {}
  // Early stopping on train.patience (pruning runs to train.max_steps: its dev BLEU is meant to
  // fall as heads go).
  virtual bool early_stopping() const { return true; }
  // Evaluate before the first step (fine-tuning logs the starting point).
  virtual bool evaluate_at_start() const { return false; }
  // Appended to the progress line (pruning shows the heads open now).
  virtual std::string progress_suffix() { return ""; }
  // Called once when the run ends (not when interrupted).
  virtual void on_finish() {}

  void prepare();
  void save(const fs::path& dir);
  bool resume_from(const fs::path& dir);
  // Makes `best` and `step-N` agree with `last` (written first by every save): after a save of an
  // evaluation, and on resume, where a kill between the writes left them behind.
  void sync_checkpoint_set(const fs::path& ckpt_dir, bool evaluated);
  void log_metrics(const nlohmann::json& record);

  Config config_;
  TrainOptions options_;
  torch::Device device_{torch::kCPU};
  data::VocabFiles vocab_files_;
  std::unique_ptr<data::Vocab> src_vocab_, tgt_vocab_;
  data::Corpus corpus_;
  std::vector<Example> train_, dev_;
  std::vector<std::vector<int64_t>> batches_;
  model::Transformer model_{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer_;
  TrainState state_;
  PrecisionChoice precision_;  // train.precision resolved for device_
  bool ready_ = false;
  int64_t allreduce_bytes_ = 0;  // sent by this process in the last step's gradient all-reduce
};

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
