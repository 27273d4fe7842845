#include "headcount/prune/export.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/model/shape.h"
#include "headcount/prune/head_gates.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"

namespace headcount::prune {

int64_t mask_fixed_at(const fs::path& checkpoint) {
  std::error_code ec;
  if (!fs::exists(run::CheckpointFolder{checkpoint}.prune_state(), ec)) return -1;
  const auto j = nlohmann::json::parse(
      run::read_checkpoint_file(checkpoint, run::CheckpointFolder::kPruneState));
  return j.value("mask_fixed_at", int64_t{-1});
}

model::Architecture export_pruned(const fs::path& checkpoint, const fs::path& out) {
  const auto info = run::read_checkpoint_info(checkpoint);
  std::error_code ec;
  const fs::path gates_file = run::CheckpointFolder{checkpoint}.gates();
  HC_CHECK(fs::exists(gates_file, ec), "{} has no gates.pt: not a checkpoint of a prune run",
           checkpoint.string());
  HC_CHECK(!fs::exists(out, ec) || fs::is_empty(out, ec),
           "{} exists and is not empty: refusing to overwrite it", out.string());
  auto model = run::load_model(info, torch::kCPU);
  HeadGates gates(model, gated_types(info.config.prune), gate_options(info.config.prune));
  model::load_weights(*gates, run::load_weights_file(gates_file), gates_file.string());
  // A checkpoint of the recovery steps (its prune state records when the mask was fixed): the
  // mask the run trained and evaluated under, 0/1 where it rewound.
  const bool fixed = mask_fixed_at(checkpoint) >= 0;
  const auto values = fixed ? fixed_mask_values(*gates, info.config.prune)
                            : final_values(*gates, info.config.prune);
  torch::NoGradGuard no_grad;
  auto pruned = prune_heads(model, values);
  run::save_checkpoint(out, pruned, nullptr, info.state, info.config, info.vocab);
  return pruned->architecture();
}

model::Architecture export_without_heads(const fs::path& checkpoint,
                                         const std::vector<model::HeadId>& removed,
                                         const fs::path& out) {
  const auto info = run::read_checkpoint_info(checkpoint);
  std::error_code ec;
  HC_CHECK(!fs::exists(out, ec) || fs::is_empty(out, ec),
           "{} exists and is not empty: refusing to overwrite it", out.string());
  auto model = run::load_model(info, torch::kCPU);
  std::map<std::string, torch::Tensor> values;
  for (const auto& h : removed) {
    const auto& per_layer = info.architecture.heads(h.type);
    HC_CHECK(h.layer >= 0 && h.layer < static_cast<int64_t>(per_layer.size()) && h.head >= 0 &&
                 h.head < per_layer[h.layer],
             "{} has no {} layer {} head {}", checkpoint.string(), model::attention_name(h.type),
             h.layer, h.head);
    const auto key = HeadGatesImpl::key(h.type, static_cast<int>(h.layer));
    // device: cpu (gate values are read on the host by prune_heads; the model is on the CPU too)
    if (!values.count(key)) values[key] = torch::ones({per_layer[h.layer]});
    values[key][h.head] = 0.0f;
  }
  torch::NoGradGuard no_grad;
  auto pruned = prune_heads(model, values);
  run::save_checkpoint(out, pruned, nullptr, info.state, info.config, info.vocab);
  return pruned->architecture();
}

std::vector<model::HeadId> removed_heads_of(const fs::path& run_dir) {
  const fs::path file = run::RunFolder{run_dir}.head_removal();
  std::error_code ec;
  HC_CHECK(fs::exists(file, ec), "{} has no head_removal.csv: not a finished prune run",
           run_dir.string());
  std::vector<model::HeadId> removed;
  for (const auto& row : run::read_head_removal(file))
    if (row.removal_step) removed.push_back(row.head);
  return removed;
}

model::Architecture export_with_mask_of(const fs::path& checkpoint, const fs::path& run_dir,
                                        const fs::path& out) {
  const auto removed = removed_heads_of(run_dir);
  const auto info = run::read_checkpoint_info(checkpoint);
  // Head numbers are positions in the run's unpruned model: they mean the same heads only in an
  // unpruned model of the same shape.
  HC_CHECK(info.architecture == model::Architecture::uniform(info.config.model),
           "{} is already pruned (heads {}): the heads {} removed are numbered in the unpruned "
           "model; give an unpruned checkpoint of the same model",
           checkpoint.string(), info.architecture.summary(), run_dir.string());
  const fs::path config = run::RunFolder{run_dir}.config();
  std::error_code ec;
  if (fs::exists(config, ec)) {
    const ModelConfig m = load_config_file(config).model;
    HC_CHECK(model::same_shape(m, info.config.model),
             "{} pruned a model of another shape than {} ({} against {})", run_dir.string(),
             checkpoint.string(), model::shape_summary(m), model::shape_summary(info.config.model));
  }
  return export_without_heads(checkpoint, removed, out);
}

std::string write_head_removal_log(const fs::path& run_dir) {
  const run::RunFolder folder{run_dir};
  auto evals = run::read_gates(folder.gates());
  HC_CHECK(!evals.empty(), "{} has no evaluation", folder.gates().string());
  // A run extended after it finished has an earlier "final" line in the middle: only the last
  // line may be final.
  std::vector<run::GateSnapshot> kept;
  for (size_t e = 0; e < evals.size(); ++e) {
    if (!evals[e].final || e + 1 == evals.size()) kept.push_back(std::move(evals[e]));
  }
  evals = std::move(kept);
  const size_t n_heads = evals.back().heads.size();
  std::vector<run::HeadRemoval> rows;
  for (size_t h = 0; h < n_heads; ++h) {
    const auto& last = evals.back().heads[h];
    run::HeadRemoval r;
    r.head = last.head;
    r.p_open = last.p_open;
    r.gate = last.gate;
    // The first evaluation from which the gate stayed 0 through the end.
    for (size_t e = evals.size(); e-- > 0;) {
      if (evals[e].heads[h].gate != 0.0) break;
      r.removal_step = evals[e].step;
      r.dev_bleu = evals[e].dev_bleu;
    }
    rows.push_back(r);
  }
  std::stable_sort(
      rows.begin(), rows.end(), [](const run::HeadRemoval& a, const run::HeadRemoval& b) {
        if (a.removal_step.has_value() != b.removal_step.has_value())
          return a.removal_step.has_value();
        return a.removal_step.value_or(0) < b.removal_step.value_or(0);  // removed heads first
      });
  run::write_head_removal(folder.head_removal(), rows, run::HeadRemovalKind::kL0);
  return run::head_removal_csv(rows, run::HeadRemovalKind::kL0);
}

}  // namespace headcount::prune
