// What a fine-tuning method adds to training: the one interface through which pruning (or any
// other regularised method) plugs into the Trainer's loop. The loop owns batching, precision,
// all-reduce, the learning-rate schedule, evaluation, checkpoints and the run folder; an extension
// owns its own parameters and state and says
//   - which parameters train, in groups, each at the scheduled rate or a fixed one;
//   - its regulariser R(step): the objective of a step is  mean token cross-entropy + R(step);
//   - what happens after each optimizer step (e.g. Lagrange multipliers ascending);
//   - what an evaluation adds (gates switched to their deterministic values, extra fields and
//     event logs);
//   - what a checkpoint carries besides the model and optimizer (its parameters and state);
//   - what happens when the run ends (e.g. writing the physically pruned model).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/common/precision.h"
#include "headcount/data/batching.h"
#include "headcount/model/transformer.h"

namespace headcount::train {

namespace fs = std::filesystem;
class Trainer;

// One optimizer parameter group: its rate is the schedule's, or fixed. `model_weights` false: not
// the model's weights (the gates' log_alpha), which train.weight_decay and train.clip_norm leave
// alone (the objective stays L_xent + R: no decay toward log_alpha 0, and no clipping that would
// tie the gates' step to the model's gradient norm).
struct ParamGroup {
  std::vector<torch::Tensor> params;
  std::optional<double> fixed_lr;
  bool model_weights = true;
};

// One Adam over the groups' parameters (a torch group per ParamGroup, in order), and each
// group's learning rate: its fixed one, or `scheduled`; weight decay (options') only for the
// groups of model weights.
std::unique_ptr<torch::optim::Adam> make_adam(const std::vector<ParamGroup>& groups,
                                              const torch::optim::AdamOptions& options);
void set_group_rates(torch::optim::Adam& adam, const std::vector<ParamGroup>& groups,
                     double scheduled);
// The parameters train.clip_norm clips together: those of the groups of model weights.
std::vector<torch::Tensor> clipped_parameters(const std::vector<ParamGroup>& groups);

// A step's regulariser: `term` is added to the per-token objective (undefined: nothing);
// `constraints` are the values it was built from, handed back to after_step (a Lagrangian
// method's constraint violations, one per pair of multipliers, which ascend on them).
struct Regulariser {
  torch::Tensor term;
  std::vector<double> constraints;
};

class TrainingExtension {
 public:
  virtual ~TrainingExtension() = default;

  // Parameter groups. Called once, when the model exists on `device` and before the optimizer is
  // built; parameters the groups leave out must have requires_grad off.
  virtual std::vector<ParamGroup> parameter_groups(model::Transformer& model,
                                                   const torch::Device& device) = 0;

  // Regulariser. begin_step is called once per optimizer step on every process that has a batch in
  // it, before the step's first before_forward, with LibTorch's generator seeded from the step's
  // first batch (the same on every process: per-step noise is drawn here); before_forward before
  // each training batch's forward pass (per-batch noise is drawn here); regulariser once per
  // optimizer step, after the batches' backward passes.
  virtual void begin_step() {}
  virtual void before_forward(const data::Batch& batch) {}
  virtual Regulariser regulariser(int64_t step) = 0;
  // Batch objective: what a training batch back-propagates, given its summed label-smoothed
  // cross-entropy `loss` and the `logits` it came from (computed under `precision`); `loss`
  // itself by default. Distillation from a teacher adds its term here.
  virtual torch::Tensor batch_objective(const data::Batch& batch, const torch::Tensor& logits,
                                        const torch::Tensor& loss,
                                        const PrecisionChoice& precision) {
    return loss;
  }

  // After step: called after the optimizer step `step` (0-based) with that step's regulariser.
  virtual void after_step(int64_t step, const Regulariser& r) {}
  // Asked once after each after_step: true when the optimizer's moments must start afresh (the
  // extension replaced the weights they were accumulated for).
  virtual bool take_optimizer_reset() { return false; }
  // The step from which train.lr's schedule (warm-up, decay) counts: 0, or later when the
  // extension restarted the training (the schedule then runs over the remaining steps).
  virtual int64_t schedule_start() const { return 0; }
  // The step the run ends at: train.max_steps (given), or earlier when the extension decided so
  // during the run (asked before every step; the learning-rate schedule runs up to it).
  virtual int64_t end_step(int64_t max_steps) const { return max_steps; }
  // The step the run ends at the latest, as far as the extension knows now: what the progress
  // line counts to and its ETA is for (a run that will end at an event still to come, e.g. a gate
  // run that stops when its mask is fixed, ends by that event's latest step, not at max_steps).
  virtual int64_t latest_end_step(int64_t max_steps) const { return end_step(max_steps); }

  // Evaluation extras: evaluations run between begin and end; the record of each (metrics.jsonl,
  // event "eval" or "final") gets the extension's fields.
  virtual void begin_evaluation() {}
  virtual void end_evaluation() {}
  virtual void evaluation_extras(int64_t step, nlohmann::json& record) {}

  // Checkpoint extras: files written into a checkpoint folder before it is swapped into place,
  // and read back on resume.
  virtual void save(const fs::path& checkpoint) {}
  virtual void load(const fs::path& checkpoint) {}

  // Event logs of the run folder besides metrics.jsonl, trimmed back to the checkpoint's step on
  // resume.
  virtual std::vector<std::string> event_logs() const { return {}; }
  // Evaluate before the first step (fine-tuning logs its starting point).
  virtual bool evaluate_at_start() const { return false; }
  // Early stopping on train.patience (pruning runs to train.max_steps).
  virtual bool early_stopping() const { return true; }
  // Appended to the progress line.
  virtual std::string progress() { return ""; }
  // Called once when the run ends (not when it is interrupted), before summary.json.
  virtual void finish(Trainer& trainer) {}
};

}  // namespace headcount::train
