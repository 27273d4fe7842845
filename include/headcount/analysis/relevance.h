// Layer-wise relevance propagation of head relevance (Voita et al. 2019, §4), with the epsilon
// rule that Ding et al. 2017 use for NMT with attention.
//
// For one sentence pair, teacher-forced on the reference, the relevance of each output position t
// starts as its top-1 logit z_t (the largest logit, not the reference token's) and is propagated
// back, layer by layer, to the embeddings. The rules, for an output z = f(inputs) of each step:
//   R_x = x * J^T (R_z / stab(z)),  stab(z) = z + eps * sign(z)  (sign(0) = +1),
// where J is the step's Jacobian with these quantities held constant (so every step is linear):
//   - linear layers: z = x W^T + b; the bias share (b / stab(z)) R_z stays behind (absorbed);
//   - residual connections: z = a + b splits R_z in proportion to a and b;
//   - layer norm: z = gamma (y - mean y) / sigma + beta with sigma constant (beta absorbed);
//   - attention: the weights alpha are constant, as the weights of a weighted sum of the values
//     (Ding et al.): relevance flows to the values, and from them to the layer's key/value input;
//     queries and keys receive none;
//   - ReLU passes relevance through unchanged (inactive units hold none).
// Relevance is conserved at each step up to what biases and the stabiliser absorb.
//
// A head's relevance to output position t is the sum of the relevance of its output neurons
// (before the output projection) over all query positions; Analyzer::relevance normalises it per
// layer (the head's share of the layer's summed head relevance).
#pragma once

#include <torch/types.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "headcount/model/transformer.h"

namespace headcount::analysis {

// The step rules. Activations have no leading output dimension; relevances carry one (N, the
// output positions propagated together): x [..., Din], R [N, ..., Dout].
torch::Tensor lrp_stabilize(const torch::Tensor& z, double eps);
// z = x W^T + b (b may be undefined): R_x [N, ..., Din].
torch::Tensor lrp_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         const torch::Tensor& r, double eps);
// z = a + b: (R_a, R_b).
std::pair<torch::Tensor, torch::Tensor> lrp_add(const torch::Tensor& a, const torch::Tensor& b,
                                                const torch::Tensor& r, double eps);
// z = gamma * (y - mean(y)) / sigma + beta over the last dimension, sigma = sqrt(var(y) + ln_eps)
// held constant: R_y.
torch::Tensor lrp_layer_norm(const torch::Tensor& y, const torch::Tensor& gamma,
                             const torch::Tensor& beta, double ln_eps, const torch::Tensor& r,
                             double eps);
// c[h, t] = sum_s alpha[h, t, s] v[h, s] with alpha constant: alpha [H, T, S], v [H, S, Dh],
// R_c [N, H, T, Dh] -> R_v [N, H, S, Dh].
torch::Tensor lrp_attention_values(const torch::Tensor& alpha, const torch::Tensor& v,
                                   const torch::Tensor& r, double eps);

// What one sentence pair gives.
struct RelevanceTrace {
  torch::Tensor top;  // [N] the top-1 logit of each output position
  // heads[type][layer]: [N, H] relevance of each head's output neurons to each output position
  // (a layer without heads: [N, 0]).
  std::array<std::vector<torch::Tensor>, 3> heads;
  torch::Tensor src_input, tgt_input;  // [N, S], [N, T] relevance reaching the embeddings
  // (name, [N]): after each step, the relevance not yet absorbed: what is still on its way down
  // plus what has reached the embeddings. Equal to `top` at every step when the model has no
  // biases and eps -> 0.
  std::vector<std::pair<std::string, torch::Tensor>> frontier;
};

// src [S] (ids, EOS last), tgt_in [T] (BOS + reference ids): relevance of all T output positions.
// Runs its own forward pass with the model's weights (eval mode: no dropout; head scales and
// gates are not applied), in the weights' dtype.
RelevanceTrace propagate_relevance(model::TransformerImpl& m, const torch::Tensor& src,
                                   const torch::Tensor& tgt_in, double eps);

}  // namespace headcount::analysis
