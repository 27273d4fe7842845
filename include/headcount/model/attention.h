// headcount's multi-head attention, written so that later work can reach inside it:
//   - each head's output (before the output projection) can be scaled per head: gates, masks
//     and importance multipliers all act there (set_head_scale);
//   - attention weights and head outputs can be recorded for analysis (set_record);
//   - any number of heads, zero included: a layer without heads still adds its output bias.
//
// Shapes: B batch, T query length, S key length, D model width, H heads, Dh head width.
// Parameters follow PyTorch's nn.MultiheadAttention layout, so weights copy across:
//   in_proj_weight [3*H*Dh, D] (query, key, value blocks), in_proj_bias [3*H*Dh],
//   out_proj_weight [D, H*Dh], out_proj_bias [D].
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <tuple>

namespace headcount::model {

// Keys and values kept across incremental decoding steps: [B, H, S, Dh].
struct KVCache {
  torch::Tensor k, v;
};

// What one forward call computed inside the layer, for passes that need its pieces (relevance
// propagation, Fisher's reconstruction): undefined for a layer without heads.
struct AttentionTrace {
  torch::Tensor weights;  // [B, H, T, S] after the softmax, before dropout
  torch::Tensor values;   // [B, H, S, Dh]
  torch::Tensor heads;    // [B, T, H*Dh] the merged head outputs (after the head scale)
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  // `self_attention` fuses the query, key and value projections into one matmul.
  MultiheadAttentionImpl(int64_t d_model, int64_t num_heads, int64_t head_dim, double dropout,
                         bool self_attention);

  // query [B, T, D]; memory [B, S, D] (unused for self-attention); bias: additive mask
  // broadcastable to [B, H, T, S] (-inf where attention is forbidden), or undefined.
  // With `cache`, self-attention appends this step's keys and values to it; encoder-decoder
  // attention computes them from `memory` once and reuses them. With `trace`, the weights, values
  // and head outputs of this call are kept there.
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& memory,
                        const torch::Tensor& bias, KVCache* cache = nullptr,
                        AttentionTrace* trace = nullptr);

  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t d_model() const { return d_model_; }
  bool self_attention() const { return self_attention_; }

  // Multiplies head h's output by scale[h] ([H]), scale[b, h] ([B, H]) or scale[b, t, h]
  // ([B, T, H], one per query token); undefined: none.
  void set_head_scale(torch::Tensor scale) { head_scale_ = std::move(scale); }
  const torch::Tensor& head_scale() const { return head_scale_; }
  // Keeps the attention weights [B, H, T, S] and head outputs [B, H, T, Dh] (after the head
  // scale) of the following forward calls (detached).
  void set_record(bool record) { record_ = record; }
  const torch::Tensor& last_weights() const { return last_weights_; }
  const torch::Tensor& last_head_outputs() const { return last_head_outputs_; }

  torch::Tensor in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias;

 private:
  // The query [B, T, H*Dh] and the keys and values [B, H, S, Dh] (from or into `cache`).
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> project(const torch::Tensor& query,
                                                                  const torch::Tensor& memory,
                                                                  KVCache* cache);
  int64_t d_model_, num_heads_, head_dim_;
  double dropout_;
  bool self_attention_;
  bool record_ = false;
  torch::Tensor head_scale_;
  torch::Tensor last_weights_, last_head_outputs_;
};
TORCH_MODULE(MultiheadAttention);

}  // namespace headcount::model
