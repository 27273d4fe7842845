// Gates on the heads of a Transformer: one HardConcreteGate per gated attention layer, acting on
// each head's output before the output projection (MultiheadAttention::set_head_scale).
#pragma once

#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/gates.h"

namespace headcount::prune {

HardConcreteOptions gate_options(const PruneConfig& c);
std::vector<model::AttentionType> gated_types(const PruneConfig& c);

// Target mode (prune.method l0): the head counts its Lagrangian asks for. prune.target_heads is
// one group over every gated head; prune.target_heads_per_type is one group per gated type, each
// with its own multipliers, so the gates choose which heads of a type to keep but not how many of
// each type (an ungated type's entry must be the model's count: it keeps every head). Empty in
// lambda mode.
struct TargetGroup {
  std::vector<model::AttentionType> types;
  int64_t heads = 0;
  std::string name;  // "all", or the type's name
};
std::vector<TargetGroup> target_groups(const PruneConfig& c);

class HeadGatesImpl : public torch::nn::Module {
 public:
  struct Layer {
    model::AttentionType type;
    int layer;
    HardConcreteGate gate{nullptr};
    model::MultiheadAttention attention{nullptr};
  };

  // Gates every layer (with at least one head) of the given attention types.
  HeadGatesImpl(model::Transformer& model, const std::vector<model::AttentionType>& types,
                const HardConcreteOptions& options);

  // Training: each gated layer scales its heads by a fresh sample ([H] or [batch, H]).
  void apply_sample(int64_t batch);
  // Training with one draw per optimizer step (noise kHead): draw_step_noise draws each layer's
  // u once, at the start of the step; apply_step_sample scales the heads by the gates that u gives
  // with the current log_alpha (a new graph for each batch's backward pass, the same values).
  void draw_step_noise();
  void apply_step_sample();
  // Evaluation: the deterministic gates, or `fixed` values where given (the final mask).
  void apply_eval();
  void apply_values(const std::map<std::string, torch::Tensor>& values);
  void clear();

  // L_C: sum of P_open over all gated heads (kSum), or the mean over gated layers of each
  // layer's sum (kLayerMean).
  torch::Tensor penalty(PenaltyNorm norm) const;
  // Expected number of open heads: sum of P_open (over the layers of `types`, all when empty).
  torch::Tensor expected_open(const std::vector<model::AttentionType>& types = {}) const;
  int64_t total_heads(const std::vector<model::AttentionType>& types = {}) const;
  // Heads whose eval gate is above zero, per attention type.
  std::map<model::AttentionType, int64_t> open_heads() const;
  // Eval gate values per layer key ("enc_self.3"), for pruning.
  std::map<std::string, torch::Tensor> eval_values() const;

  std::vector<Layer>& layers() { return layers_; }
  const std::vector<Layer>& layers() const { return layers_; }
  static std::string key(model::AttentionType type, int layer);

 private:
  std::vector<Layer> layers_;
  std::vector<torch::Tensor> step_noise_;  // per layer, from draw_step_noise
};
TORCH_MODULE(HeadGates);

// Keeps exactly `n` heads: the ones with the largest log_alpha (equivalently, expected gate).
// Kept heads take their eval gate; a kept head whose eval gate is 0 (the gates closed more than
// `n` heads) takes its expected gate E[g] instead, a small positive value; the others 0. Returns
// values per layer key, for the layers of `types` (all gated layers when empty).
std::map<std::string, torch::Tensor> top_n_values(
    const HeadGatesImpl& gates, int64_t n, const std::vector<model::AttentionType>& types = {});

// Splits `n` heads between groups of `sizes[i]` heads in proportion to `expected[i]` (a group's
// expected open heads): each group's quota n x expected[i] / sum(expected), a quota above the
// group's size capped at it and the rest shared again among the others, then each quota's floor
// plus one head for the largest fractional parts until the counts add up to n (ties to the
// earlier group). Needs 0 <= n <= sum(sizes); with every expected value 0 the sizes stand in.
std::vector<int64_t> split_by_expected(std::vector<double> expected,
                                       const std::vector<int64_t>& sizes, int64_t n);
// A type's open heads as prune.target_split expected counts them: the sum of P_open over its
// heads, leaving out those below `floor` (prune.split_floor; 0 = every head, E[open] of the type).
double counted_open(const HeadGatesImpl& gates, model::AttentionType type, double floor = 0);
// prune.target_split expected: how many of `n` heads each of `types` keeps (split_by_expected of
// the types' counted_open with prune.split_floor `floor`; a floor above every head's P_open
// splits as without one), in the order of `types`.
std::vector<int64_t> expected_split(const HeadGatesImpl& gates, int64_t n,
                                    const std::vector<model::AttentionType>& types,
                                    double floor = 0);

// What a prune run's gates say to keep at its end: in target mode top_n_values of each target
// group (exactly prune.target_heads heads, or prune.target_heads_per_type's per type; with
// prune.target_split expected and one total over several types, top_n_values within each type of
// its expected_split count), the eval gates otherwise.
std::map<std::string, torch::Tensor> final_values(const HeadGatesImpl& gates, const PruneConfig& p);
// The mask of a run whose mask is fixed (its recovery steps): final_values, with prune.rewind made
// 0/1 (the rewound weights were trained with every head at full strength, so a kept head is kept
// at 1). Trainer and export-pruned both take it, so an exported checkpoint of the recovery steps
// computes what the run evaluated.
std::map<std::string, torch::Tensor> fixed_mask_values(const HeadGatesImpl& gates,
                                                       const PruneConfig& p);

// A physically smaller model computing what `model` computes with heads scaled by `values`
// (layer key -> [H] gate values; layers without an entry keep every head unscaled): heads with
// value 0 lose their rows of W_q, W_k, W_v and their columns of W_o; other values are folded into
// W_o; a layer without heads keeps its output bias.
model::Transformer prune_heads(model::Transformer& model,
                               const std::map<std::string, torch::Tensor>& values);

}  // namespace headcount::prune
