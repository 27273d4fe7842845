// `headcount prune`: fine-tunes a converged model with Hard-Concrete gates on its heads under
// xent + lambda(step) * L_C (or toward a target head count through Lagrange multipliers), logs
// every gate at every evaluation (gates.jsonl), and ends with the head-removal log
// (head_removal.csv), a readable summary (README.md) and a physically pruned checkpoint (pruned/).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "headcount/prune/export.h"
#include "headcount/prune/head_gates.h"
#include "headcount/prune/schedule.h"
#include "headcount/train/trainer.h"

namespace headcount::prune {

// L0 pruning as a training extension: gates on the heads of prune.attention, trained with the
// parts of prune.train_parts; the regulariser (regulariser(), the whole objective's extra term)
// is lambda(step) x L_C, or in target mode lambda1 x gap + lambda2 x gap^2 with multipliers that
// ascend on the gap after each step (with prune.target_heads_per_type, one such term and pair of
// multipliers per gated type, each on its own type's gap).
class L0Pruning : public train::TrainingExtension {
 public:
  L0Pruning(const Config& config, const train::TrainOptions& options);
  HeadGates& gates() { return gates_; }
  // The gate values the run ends with: the eval gates, or in target mode exactly
  // prune.target_heads heads, or prune.target_heads_per_type's per type (top-N by log_alpha).
  std::map<std::string, torch::Tensor> final_values();

  std::vector<train::ParamGroup> parameter_groups(model::Transformer& model,
                                                  const torch::Device& device) override;
  void begin_step() override;
  void before_forward(const data::Batch& batch) override;
  // With prune.distill_weight: (1 - w) x loss + w x the distillation term from the teacher.
  torch::Tensor batch_objective(const data::Batch& batch, const torch::Tensor& logits,
                                const torch::Tensor& loss,
                                const PrecisionChoice& precision) override;
  train::Regulariser regulariser(int64_t step) override;
  void after_step(int64_t step, const train::Regulariser& r) override;
  // prune.rewind: the optimizer restarts once, and train.lr's schedule runs from the fixing point.
  bool take_optimizer_reset() override;
  int64_t schedule_start() const override;
  // prune.exact_recovery: recovery_steps after the step the mask was fixed at.
  int64_t end_step(int64_t max_steps) const override;
  // prune.stop_at_fix before the mask is fixed: the latest fixing point (max_steps -
  // recovery_steps); otherwise end_step.
  int64_t latest_end_step(int64_t max_steps) const override;
  void begin_evaluation() override;
  void evaluation_extras(int64_t step, nlohmann::json& record) override;
  void save(const fs::path& checkpoint) override;
  void load(const fs::path& checkpoint) override;
  std::vector<std::string> event_logs() const override { return {run::RunFolder::kGates}; }
  bool evaluate_at_start() const override { return true; }
  bool early_stopping() const override { return false; }
  std::string progress() override;
  // The final evaluation with the final gates, pruned/, head_removal.csv, pruning.json, README.md.
  void finish(train::Trainer& trainer) override;

 private:
  // Recovery (prune.recovery_steps): from the step `fix_step_` on, the heads are scaled by the
  // final mask instead of gate samples, the regulariser is off and the gates stay where they were
  // (their log_alpha is restored after every step: Adam's momentum would move them on).
  void fix_mask(int64_t step);
  // prune.rewind, when the mask is fixed during the run: the model's weights become
  // prune.init_from's again (the gates and their mask stay).
  void rewind_weights();
  // The mask fixed by a step of this run (not by a resume): fix_mask, then the rewind if asked.
  void fix_during_run(int64_t step);
  bool fixed() const { return fixed_values_.has_value(); }
  // Heads open per gated type: by the gates' eval values, or by the fixed mask once it is fixed.
  std::map<model::AttentionType, int64_t> open_heads();
  // Target mode: the groups' checks against the gated model; the multipliers start at 0.
  void set_targets();
  // Target mode's keys of an evaluation record: target_heads, target_now (the ramp's count now),
  // the multipliers; per type, each type's count, target now, expected open heads, multipliers.
  void target_record(int64_t step, nlohmann::json& record);
  std::string target_log(const nlohmann::json& record) const;
  // prune.fix_at_target: after the ramp, every group's expected open heads at or below its count.
  bool reached_target(int64_t steps_done) const;
  // The values the export takes now: the fixed mask, or final_values().
  std::map<std::string, torch::Tensor> mask_values();
  // prune.gate_seeds: the gates become the mean P_open of the gate runs' (log_alpha such that
  // P_open is that mean), logged per type beside each gate run's own mask.
  void average_gate_runs();

  const Config config_;
  const train::TrainOptions options_;
  model::Transformer model_{nullptr};
  HeadGates gates_{nullptr};
  LambdaSchedule schedule_;
  // Target mode: its head-count groups (target_groups) and each group's Lagrange multipliers.
  std::vector<TargetGroup> targets_;
  std::vector<double> lambda1_, lambda2_;
  bool finished_ = false;
  int64_t fix_step_ = -1;  // -1: no recovery
  int64_t fixed_at_ = -1;  // the step the mask was fixed at (-1: not yet)
  // prune.distill_weight: the unpruned model (prune.init_from), frozen, in eval mode.
  model::Transformer teacher_{nullptr};
  torch::Device device_ = torch::kCPU;
  std::optional<std::map<std::string, torch::Tensor>> fixed_values_;
  std::vector<torch::Tensor> fixed_log_alpha_;  // per gated layer
  // prune.freeze_until_fixed: the trained parts' parameters, without gradients until fix_mask.
  std::vector<torch::Tensor> frozen_weights_;
  bool optimizer_reset_ = false;  // prune.rewind: pending for the trainer
};

// prune.gate_seeds: the folder of the gate run with `seed` (RUN/gate-seeds/seed-S) and its config
// (the run's own with that seed, prune.stop_at_fix on and no gate_seeds of its own).
fs::path gate_seed_run(const fs::path& run_dir, int64_t seed);
Config gate_seed_config(const Config& config, int64_t seed);

// `headcount prune` with prune.method l0: with prune.gate_seeds, first each gate run not finished
// yet (one after the other; each resumable like any run), then the run itself. `interrupted`:
// a stop asked for (Ctrl-C, SIGTERM) ended it early; the same call resumes.
train::TrainSummary prune_command(const Config& config, const train::TrainOptions& options);

// `headcount prune`: a Trainer with L0Pruning.
class PruneTrainer {
 public:
  PruneTrainer(Config config, train::TrainOptions options);
  train::TrainSummary run() { return trainer_.run(); }
  model::Transformer& model() { return trainer_.model(); }
  HeadGates& gates() { return l0_->gates(); }
  std::map<std::string, torch::Tensor> final_values() { return l0_->final_values(); }

 private:
  PruneTrainer(std::unique_ptr<L0Pruning> l0, const Config& config,
               const train::TrainOptions& options);
  L0Pruning* l0_;  // owned by trainer_
  train::Trainer trainer_;
};

}  // namespace headcount::prune
