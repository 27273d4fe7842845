// `headcount prune`: fine-tunes a converged model with Hard-Concrete gates on its heads under
// xent + lambda(step) * L_C (or toward a target head count through Lagrange multipliers), logs
// every gate at every evaluation (gates.jsonl), and ends with the head-removal log
// (head_removal.csv), a readable summary (README.md) and a physically pruned checkpoint (pruned/).
#pragma once

#include "headcount/prune/head_gates.h"
#include "headcount/prune/schedule.h"
#include "headcount/train/trainer.h"

namespace headcount::prune {

class PruneTrainer : public train::Trainer {
 public:
  PruneTrainer(Config config, train::TrainOptions options);
  HeadGates& gates() { return gates_; }
  // The gate values the run ends with: the eval gates, or in target mode exactly
  // prune.target_heads heads (top-N by log_alpha).
  std::map<std::string, torch::Tensor> final_values();

 protected:
  void on_model_ready() override;
  std::vector<torch::Tensor> trainable_parameters() override;
  std::vector<torch::optim::OptimizerParamGroup> parameter_groups() override;
  double group_lr(size_t group, double scheduled_lr) override;
  std::vector<std::string> event_logs() const override { return {"metrics.jsonl", "gates.jsonl"}; }
  void before_forward(const train::Batch& batch) override;
  torch::Tensor extra_loss(int64_t step) override;
  void after_step(int64_t step) override;
  void before_evaluate() override;
  void on_evaluation(int64_t step, nlohmann::json& record) override;
  void save_extra(const fs::path& dir) override;
  void load_extra(const fs::path& dir) override;
  bool evaluate_at_start() const override { return true; }
  bool early_stopping() const override { return false; }
  void on_finish() override;
  std::string progress_suffix() override;

 private:
  double lambda_at(int64_t step) const;
  std::vector<torch::Tensor> model_parameters_;
  HeadGates gates_{nullptr};
  LambdaSchedule schedule_;
  size_t gate_group_ = 0;
  // Target mode.
  double lambda1_ = 0, lambda2_ = 0, last_gap_ = 0;
  bool finished_ = false;
};

// Writes a physically pruned checkpoint of any checkpoint of a prune run (its gates.pt): the
// eval gates, or in target mode the top prune.target_heads heads. Returns the new architecture.
model::Architecture export_pruned(const fs::path& checkpoint, const fs::path& out);

struct HeadRef {
  model::AttentionType type;
  int64_t layer = 0, head = 0;
};

// Writes a physically pruned copy of any checkpoint without the given heads (e.g. the least
// important ones by Michel et al.'s I_h), as a starting point for fine-tuning
// (`train --init-from`). Returns the new architecture.
model::Architecture export_without_heads(const fs::path& checkpoint,
                                         const std::vector<HeadRef>& removed, const fs::path& out);

// Reads gates.jsonl and metrics.jsonl of a run and writes head_removal.csv (one row per gated
// head in the order heads were removed). Returns the rows as CSV text too.
std::string write_head_removal_log(const fs::path& run_dir);

}  // namespace headcount::prune
