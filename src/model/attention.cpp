#include "headcount/model/attention.h"

#include "headcount/model/batched_matmul.h"
#include "headcount/model/dropout.h"

#include <torch/nn/functional.h>
#include <torch/nn/init.h>

#include <cmath>

namespace headcount::model {

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t d_model, int64_t num_heads, int64_t head_dim,
                                               double dropout, bool self_attention)
    : d_model_(d_model),
      num_heads_(num_heads),
      head_dim_(head_dim),
      dropout_(dropout),
      self_attention_(self_attention) {
  const int64_t inner = num_heads * head_dim;
  if (num_heads > 0) {
    // Xavier-uniform as PyTorch's MultiheadAttention, zero biases. Parameters are created on the
    // host, as every module's; the model is moved to its device as a whole.
    // device: cpu (a parameter, moved with its module)
    in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * inner, d_model}));
    // device: cpu (a parameter, moved with its module)
    in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * inner}));
    // device: cpu (a parameter, moved with its module)
    out_proj_weight = register_parameter("out_proj_weight", torch::empty({d_model, inner}));
    torch::nn::init::xavier_uniform_(in_proj_weight);
    const double bound = 1.0 / std::sqrt(static_cast<double>(inner));
    torch::nn::init::uniform_(out_proj_weight, -bound, bound);
  }
  // Kept even without heads: the layer still adds it to the residual stream.
  // device: cpu (a parameter, moved with its module)
  out_proj_bias = register_parameter("out_proj_bias", torch::zeros({d_model}));
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> MultiheadAttentionImpl::project(
    const torch::Tensor& query, const torch::Tensor& memory, KVCache* cache) {
  const int64_t B = query.size(0), T = query.size(1);
  const int64_t H = num_heads_, Dh = head_dim_, HD = H * Dh;
  torch::Tensor q, k, v;  // q [B, T, HD]; k, v [B, H, S, Dh]
  if (self_attention_) {
    auto qkv = torch::linear(query, in_proj_weight, in_proj_bias).split(HD, -1);  // 3 x [B, T, HD]
    q = qkv[0];
    k = qkv[1].view({B, T, H, Dh}).transpose(1, 2);  // [B, H, T, Dh]
    v = qkv[2].view({B, T, H, Dh}).transpose(1, 2);
    if (cache) {
      if (cache->k.defined()) {
        k = torch::cat({cache->k, k}, 2);  // [B, H, S_prev + T, Dh]
        v = torch::cat({cache->v, v}, 2);
      }
      cache->k = k;
      cache->v = v;
    }
  } else {
    q = torch::linear(query, in_proj_weight.narrow(0, 0, HD), in_proj_bias.narrow(0, 0, HD));
    if (cache && cache->k.defined()) {
      k = cache->k;
      v = cache->v;
    } else {
      const int64_t S = memory.size(1);
      auto kv = torch::linear(memory, in_proj_weight.narrow(0, HD, 2 * HD),
                              in_proj_bias.narrow(0, HD, 2 * HD))
                    .split(HD, -1);                   // 2 x [B, S, HD]
      k = kv[0].view({B, S, H, Dh}).transpose(1, 2);  // [B, H, S, Dh]
      v = kv[1].view({B, S, H, Dh}).transpose(1, 2);
      if (cache) {
        cache->k = k;
        cache->v = v;
      }
    }
  }
  return {q, k, v};
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& memory,
                                              const torch::Tensor& bias, KVCache* cache,
                                              AttentionTrace* trace) {
  const int64_t B = query.size(0), T = query.size(1);
  if (trace) *trace = AttentionTrace{};
  if (num_heads_ == 0) {
    last_weights_ = torch::Tensor();
    last_head_outputs_ = torch::Tensor();
    // The output projection of no heads: its bias, computed as the projection of an empty input
    // so that it comes out as a masked layer's would (under autocast in bf16, rounded as there).
    // (The layer has no weight of its own then: [D, 0].)
    return torch::linear(query.new_zeros({B, T, 0}), query.new_zeros({d_model_, 0}),
                         out_proj_bias);  // [B, T, D]
  }
  const int64_t H = num_heads_, Dh = head_dim_, HD = H * Dh;
  // Under bf16 mixed precision (autocast) the projections come out in bf16, and so do the two
  // products of the attention itself (q k^T and weights v, oneDNN's bf16 kernels on the CPU);
  // the scores are scaled and masked in fp32, the softmax, its dropout and the gates run in fp32,
  // and the key/value cache holds bf16. In fp32 everything runs in fp32, the products in
  // headcount's batched kernel.
  auto [q, k, v] = project(query, memory, cache);
  q = q.view({B, T, H, Dh}).transpose(1, 2);  // [B, H, T, Dh]
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  const bool low_precision = q.scalar_type() != torch::kFloat32;
  torch::Tensor scores;  // [B, H, T, S], fp32
  if (low_precision) {
    const auto raw = torch::matmul(q, k.transpose(-2, -1));  // bf16 product, fp32 accumulation
    // One pass: bias + scale * raw, promoted to fp32 (the scale is not rounded to bf16).
    scores = bias.defined() ? torch::add(bias.to(torch::kFloat32), raw, scale)
                            : raw.to(torch::kFloat32).mul_(scale);
  } else {
    scores = batched_matmul(q * scale, k.transpose(-2, -1));
    if (bias.defined()) scores = scores + bias;
  }
  auto weights = torch::softmax(scores, -1);  // [B, H, T, S], fp32
  if (record_) last_weights_ = weights.detach();
  if (trace) {
    trace->weights = weights;
    trace->values = v;
  }
  weights = model::dropout(weights, dropout_, is_training());
  auto heads = low_precision ? torch::matmul(weights.to(v.scalar_type()), v)
                             : batched_matmul(weights, v);  // [B, H, T, Dh]
  if (head_scale_.defined()) {
    // [H] -> [1, H, 1, 1]; [B, H] -> [B, H, 1, 1]; [B, T, H] (one multiplier per query token,
    // for per-token importance scores) -> [B, H, T, 1]
    auto s = head_scale_.dim() == 1   ? head_scale_.view({1, H, 1, 1})
             : head_scale_.dim() == 2 ? head_scale_.view({B, H, 1, 1})
                                      : head_scale_.permute({0, 2, 1}).unsqueeze(-1);
    heads = heads * s;
  }
  if (record_) last_head_outputs_ = heads.detach();
  auto merged = heads.transpose(1, 2).reshape({B, T, HD});  // [B, T, H*Dh]
  if (trace) trace->heads = merged;
  return torch::linear(merged, out_proj_weight, out_proj_bias);  // [B, T, D]
}

}  // namespace headcount::model
