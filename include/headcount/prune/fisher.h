// Post-training head pruning with Fisher information (Kwon et al. 2022, "A Fast Post-Training
// Pruning Framework for Transformers"), adapted to encoder-decoder translation and to heads:
//
//   1. calibration: teacher-forced passes over N training sentences with every head's mask m at 1;
//      per sentence s, g_s = dL_s/dm (L_s: the sentence's summed token cross-entropy, no label
//      smoothing). Per attention layer the Fisher block F = (1/N) sum_s g_s g_s^T ([H, H]); its
//      diagonal scores single heads: removing a set Z costs about (1/2) 1_Z^T F 1_Z in loss.
//   2. mask search: per attention type t, keep the k_t heads with the largest diagonal Fisher;
//      the k_t minimise the summed diagonal Fisher of the removed heads under the budget (a head
//      count, a count per type, or a cost per head of each type: decoding FLOPs or measured
//      latency). Costs are uniform within a type, so the search enumerates every (k_t) exactly.
//   3. mask rearrangement: within each layer, keep the layer's count but choose the subset that
//      minimises 1_Z^T F_layer 1_Z over the removed set Z (the full block: exhaustively up to
//      20,000 subsets, by swaps from the search's choice beyond; never worse than that choice).
//   4. reconstruction: refit each pruned layer's output projection W_o and bias b by ridge least
//      squares, so that the layer's output from its kept heads matches the unpruned layer's on the
//      calibration tokens (prune.reconstruct_mode one_pass: both computed from the unpruned
//      model's activations, one pass), or layer by layer in forward order from the pruned and
//      already refit model's own inputs (sequential, sequential_stream: reconstruct_sequential).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/data/batching.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/outcome.h"
#include "headcount/train/trainer.h"

namespace headcount::prune {

// Per attention layer with heads (key "enc_self.3", as HeadGatesImpl::key).
struct CalibrationStats {
  std::map<std::string, torch::Tensor> fisher;  // [H, H] double: (1/N) sum_s g_s g_s^T
  // [H*Dh+1, H*Dh+1] double: Gram matrix of [Z, 1] over the calibration tokens (non-padding
  // queries), Z the layer's concatenated head outputs, i.e. the input of W_o.
  std::map<std::string, torch::Tensor> gram;
  int64_t sentences = 0;
  int64_t tokens = 0;  // target tokens scored
};

// One pass (forward and backward, fp32, no dropout) over `examples` in batches of at most
// `max_tokens`. The model's head scales are cleared afterwards.
CalibrationStats calibrate(model::Transformer& model, const std::vector<data::Example>& examples,
                           const std::vector<model::AttentionType>& types, int64_t max_tokens,
                           const torch::Device& device, bool with_gram);

// Ridge least-squares refit of an attention layer's output projection for the kept heads:
// minimises ||[Z_K, 1] [W_K^T; b^T] - [Z, 1] [W^T; b^T]||^2 + lambda ||W_K||^2 over the
// calibration tokens, given only their Gram matrix `gram` of [Z, 1] ([H*Dh+1]^2); lambda =
// `ridge` x the mean diagonal of Z_K's Gram block (the bias is not penalised). Returns the new
// weight [D, H*Dh] (zero columns for removed heads) and bias [D], in the input's dtype. With
// `fit`, also the squared errors against the unpruned layer's output before the refit (the kept
// heads through W and b) and after it, from the Gram matrix alone (its `layer` is left as is).
std::pair<torch::Tensor, torch::Tensor> refit_output_projection(
    const torch::Tensor& gram, const torch::Tensor& weight, const torch::Tensor& bias,
    const std::vector<bool>& keep, double ridge, LayerRefit* fit = nullptr);

// sum ||Y - X S||^2 over the rows, from a = X^T X, c = X^T Y and yy = sum Y^2 (clamped at 0).
double residual_sum_of_squares(const torch::Tensor& a, const torch::Tensor& c, double yy,
                               const torch::Tensor& s);

// Ridge least squares from sufficient statistics: a = [X, 1]^T [X, 1] ([k+1, k+1], the constant
// last), c = [X, 1]^T Y ([k+1, D]). Returns S [k+1, D] solving (a + lambda diag(1, .., 1, 0)) S
// = c, lambda = `ridge` x the mean of a's first k diagonal entries (the constant is not
// penalised). Double precision.
torch::Tensor ridge_solve(torch::Tensor a, const torch::Tensor& c, double ridge);

// Sequential reconstruction (prune.reconstruct_mode sequential or sequential_stream). `pruned`
// is a physically pruned copy of `reference` (prune_heads with 0/1 values: same weights, fewer
// heads). Walks both models sublayer by sublayer in forward order over the calibration
// sentences (eval mode, no gradients), keeping both residual streams; each attention layer of
// `pruned` with fewer heads than its counterpart gets its W_o and bias refit (ridge_solve) from
// its kept heads' outputs, computed from its own inputs (earlier layers already refit), toward
// the reference sublayer's output (sequential) or toward the reference's residual stream after
// the sublayer minus the pruned stream before it (sequential_stream: the sum entering the
// sublayer's residual connection matches). Returns each refit layer's errors in forward order.
// With `every_layer`, the layers that kept every head are refit too, toward the same target.
std::vector<LayerRefit> reconstruct_sequential(model::Transformer& pruned,
                                               model::Transformer& reference,
                                               const std::vector<data::Example>& examples,
                                               int64_t max_tokens, const torch::Device& device,
                                               double ridge, ReconstructMode mode,
                                               bool every_layer = false);

// The budget of the mask search: keep per type at most `limit` = fixed + sum_t k_t cost[t], or
// with `exact_total` >= 0 exactly that many heads in all, or with `exact_per_type` exactly those.
struct SearchBudget {
  std::map<model::AttentionType, double> cost;  // per kept head
  double fixed = 0;
  double limit = 0;
  int64_t exact_total = -1;
  std::map<model::AttentionType, int64_t> exact_per_type;
};

// Heads to keep per type: `scores[t]` holds the diagonal Fisher of every head of type t (any
// order). Minimises the summed scores of the removed heads (each type removes its lowest). An
// impossible budget is an error naming it.
std::map<model::AttentionType, int64_t> search_counts(
    const std::map<model::AttentionType, std::vector<double>>& scores, const SearchBudget& budget);

// As many heads of a layer as `start` keeps, chosen to minimise 1_Z^T F 1_Z over the removed set
// Z: every subset up to 20,000 of them, beyond that swaps of a kept and a removed head from
// `start` while one lowers it. Never worse than `start`, and `start` itself on ties. Returns a
// keep flag per head.
std::vector<bool> rearrange_layer(const torch::Tensor& fisher_block,
                                  const std::vector<bool>& start);

// `headcount prune` with prune.method fisher: writes the run folder an L0 run writes
// (config.yaml, metrics.jsonl, head_removal.csv in the order the search removed heads,
// pruning.json, README.md, pruned/, summary.json). A finished folder is left as it is.
void fisher_prune_command(const Config& config, const train::TrainOptions& options);

}  // namespace headcount::prune
