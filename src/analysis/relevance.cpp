#include "headcount/analysis/relevance.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "headcount/common/check.h"

namespace headcount::analysis {

using model::AttentionType;

torch::Tensor lrp_stabilize(const torch::Tensor& z, double eps) {
  return z + eps * torch::where(z >= 0, torch::ones_like(z), -torch::ones_like(z));
}

torch::Tensor lrp_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         const torch::Tensor& r, double eps) {
  const auto z = b.defined() ? torch::linear(x, w, b) : torch::linear(x, w);
  const auto s = r / lrp_stabilize(z, eps);  // [N, ..., Dout]
  return x * torch::matmul(s, w);            // [N, ..., Din]
}

std::pair<torch::Tensor, torch::Tensor> lrp_add(const torch::Tensor& a, const torch::Tensor& b,
                                                const torch::Tensor& r, double eps) {
  const auto s = r / lrp_stabilize(a + b, eps);
  return {a * s, b * s};
}

torch::Tensor lrp_layer_norm(const torch::Tensor& y, const torch::Tensor& gamma,
                             const torch::Tensor& beta, double ln_eps, const torch::Tensor& r,
                             double eps) {
  const auto mean = y.mean(-1, true);
  const auto sigma = (y.var(-1, /*unbiased=*/false, true) + ln_eps).sqrt();
  const auto z = gamma * (y - mean) / sigma + beta;
  const auto g = r / lrp_stabilize(z, eps) * gamma / sigma;  // [N, ..., D]
  // The centring's Jacobian (I - 11^T/D) is symmetric: J^T g = g - mean(g).
  return y * (g - g.mean(-1, true));
}

torch::Tensor lrp_attention_values(const torch::Tensor& alpha, const torch::Tensor& v,
                                   const torch::Tensor& r, double eps) {
  const auto c = torch::matmul(alpha, v);  // [H, T, Dh]
  const auto s = r / lrp_stabilize(c, eps);
  return v * torch::matmul(alpha.transpose(-2, -1), s);  // [N, H, S, Dh]
}

namespace {

using model::SublayerTrace;

// The model's trace of one sentence pair (batch of one) without its batch dimension.
void unbatch(torch::Tensor& t) {
  if (t.defined()) t = t.squeeze(0);
}
void unbatch(SublayerTrace& t) {
  for (auto* x : {&t.x, &t.input, &t.f, &t.hidden, &t.attention.weights, &t.attention.values,
                  &t.attention.heads})
    unbatch(*x);
}
void unbatch(model::ForwardTrace& f) {
  for (auto* x : {&f.src_tokens, &f.src_positions, &f.tgt_tokens, &f.tgt_positions, &f.encoder_out,
                  &f.memory, &f.decoder_out, &f.final_hidden})
    unbatch(*x);
  for (auto& l : f.encoder)
    for (auto* t : {&l.self_attn, &l.ffn}) unbatch(*t);
  for (auto& l : f.decoder)
    for (auto* t : {&l.self_attn, &l.cross_attn, &l.ffn}) unbatch(*t);
}

// R_out [N, T, D] -> relevance of the key/value input `kv_in` [S, D] ([N, S, D]); `head` gets
// [N, H]. The attention's weights [H, T, S], values [H, S, Dh] and merged head outputs [T, H*Dh]
// come from the model's trace.
torch::Tensor attention_backward(model::MultiheadAttentionImpl& a, const SublayerTrace& t,
                                 const torch::Tensor& kv_in, const torch::Tensor& r_out, double eps,
                                 torch::Tensor* head) {
  const int64_t N = r_out.size(0), T = r_out.size(1), S = kv_in.size(0);
  const int64_t H = a.num_heads(), Dh = a.head_dim(), HD = H * Dh;
  if (H == 0) {  // everything is the output bias's
    *head = torch::zeros({N, 0}, r_out.options());
    return torch::zeros({N, S, a.d_model()}, r_out.options());
  }
  const auto& att = t.attention;
  const auto r_merged = lrp_linear(att.heads, a.out_proj_weight, a.out_proj_bias, r_out, eps);
  const auto r_c = r_merged.view({N, T, H, Dh}).permute({0, 2, 1, 3});  // [N, H, T, Dh]
  *head = r_c.sum({2, 3});
  const auto r_v = lrp_attention_values(att.weights, att.values, r_c, eps);  // [N, H, S, Dh]
  return lrp_linear(kv_in, a.in_proj_weight.narrow(0, 2 * HD, HD),
                    a.in_proj_bias.narrow(0, 2 * HD, HD),
                    r_v.permute({0, 2, 1, 3}).reshape({N, S, HD}), eps);
}

// The feed-forward network: its input [L, D] and ReLU output [L, F] from the trace.
torch::Tensor ffn_backward(torch::nn::LinearImpl& fc1, torch::nn::LinearImpl& fc2,
                           const SublayerTrace& t, const torch::Tensor& r, double eps) {
  // ReLU passes relevance through: what reaches an inactive unit is already zero (h = 0).
  const auto r_h = lrp_linear(t.hidden, fc2.weight, fc2.bias, r, eps);
  return lrp_linear(t.input, fc1.weight, fc1.bias, r_h, eps);
}

torch::Tensor lrp_norm(torch::nn::LayerNormImpl& ln, const torch::Tensor& y, const torch::Tensor& r,
                       double eps) {
  return lrp_layer_norm(y, ln.weight, ln.bias, ln.options.eps(), r, eps);
}

// Backward through the residual and (post-norm) the norm of a sublayer: post-norm
// out = LN(x + f), pre-norm out = x + f; returns (R_x through the residual, R_f for the sublayer).
std::pair<torch::Tensor, torch::Tensor> residual_backward(bool pre_norm,
                                                          torch::nn::LayerNormImpl& ln,
                                                          const SublayerTrace& t,
                                                          const torch::Tensor& r, double eps) {
  const auto r_sum = pre_norm ? r : lrp_norm(ln, t.x + t.f, r, eps);
  return lrp_add(t.x, t.f, r_sum, eps);
}

// From the sublayer's input back to its residual stream: pre-norm through LN, post-norm as is.
torch::Tensor sub_input_backward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                 const torch::Tensor& x, const torch::Tensor& r, double eps) {
  return pre_norm ? lrp_norm(ln, x, r, eps) : r;
}

torch::Tensor self_attention_backward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                      model::MultiheadAttentionImpl& a, const SublayerTrace& t,
                                      const torch::Tensor& r, double eps, torch::Tensor* head) {
  const auto [r_res, r_f] = residual_backward(pre_norm, ln, t, r, eps);
  return r_res + sub_input_backward(pre_norm, ln, t.x,
                                    attention_backward(a, t, t.input, r_f, eps, head), eps);
}

torch::Tensor ffn_block_backward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                 torch::nn::LinearImpl& fc1, torch::nn::LinearImpl& fc2,
                                 const SublayerTrace& t, const torch::Tensor& r, double eps) {
  const auto [r_res, r_f] = residual_backward(pre_norm, ln, t, r, eps);
  return r_res + sub_input_backward(pre_norm, ln, t.x, ffn_backward(fc1, fc2, t, r_f, eps), eps);
}

torch::Tensor total(const torch::Tensor& r) {
  return r.flatten(1).sum(1);  // [N]
}

// The model's own forward pass of one sentence pair, traced (everything the backward pass
// reads), and its logits [T, V].
struct ForwardTape {
  int64_t S = 0, T = 0, D = 0;
  model::ForwardTrace trace;
  torch::Tensor logits;
};

ForwardTape forward(model::TransformerImpl& m, const torch::Tensor& src,
                    const torch::Tensor& tgt_in) {
  HC_CHECK(!m.is_training(), "relevance: the model must be in evaluation mode (no dropout)");
  ForwardTape f;
  f.S = src.size(0);
  f.T = tgt_in.size(0);
  f.D = m.config().d_model;
  const auto dev = m.output_weight.device();
  const auto enc = m.encode(src.to(dev).unsqueeze(0), &f.trace);
  f.logits = m.decode(tgt_in.to(dev).unsqueeze(0), enc, nullptr, &f.trace).squeeze(0);
  unbatch(f.trace);
  return f;
}

// Backward from the top-1 logits to the decoder's embeddings; returns the relevance that reached
// the encoder's output through the encoder-decoder attention, R_mem [N, S, D].
torch::Tensor decoder_backward(model::TransformerImpl& m, const ForwardTape& f, double eps,
                               RelevanceTrace* tr) {
  const bool pre = m.config().pre_norm;
  const auto [top, top_id] = f.logits.max(-1);
  // Output position n starts with its top-1 logit, z = h_n . W[k].
  tr->top = top;
  const auto& t = f.trace;
  const auto contrib = t.final_hidden * m.output_weight.index_select(0, top_id);  // [T, D]
  const auto start = contrib * (top / lrp_stabilize(top, eps)).unsqueeze(-1);
  auto r =
      torch::eye(f.T, t.final_hidden.options()).unsqueeze(-1) * start.unsqueeze(0);  // [N, T, D]
  const int64_t N = f.T;
  auto r_mem = torch::zeros({N, f.S, f.D}, r.options());
  auto mark = [&](const std::string& name) {
    tr->frontier.emplace_back(name, total(r) + total(r_mem));
  };
  if (pre) r = lrp_norm(*m.decoder_norm, t.decoder_out, r, eps);
  mark("decoder output");
  for (size_t l = m.decoder_layers.size(); l-- > 0;) {
    auto& L = *m.decoder_layers[l];
    const auto& lt = t.decoder[l];
    r = ffn_block_backward(pre, *L.ffn_norm, *L.fc1, *L.fc2, lt.ffn, r, eps);
    mark(fmt::format("decoder {} ffn", l));
    // Encoder-decoder attention: the queries receive nothing, the memory the values' share.
    const auto [r_res, r_f] = residual_backward(pre, *L.cross_attn_norm, lt.cross_attn, r, eps);
    r_mem = r_mem + attention_backward(*L.cross_attn, lt.cross_attn, t.memory, r_f, eps,
                                       &tr->heads[static_cast<int>(AttentionType::kEncDec)][l]);
    r = r_res;
    mark(fmt::format("decoder {} enc-dec attention", l));
    r = self_attention_backward(pre, *L.self_attn_norm, *L.self_attn, lt.self_attn, r, eps,
                                &tr->heads[static_cast<int>(AttentionType::kDecSelf)][l]);
    mark(fmt::format("decoder {} self-attention", l));
  }
  const auto [r_tok, r_pos] = lrp_add(t.tgt_tokens, t.tgt_positions, r, eps);
  tr->tgt_input = r_tok.sum(-1) + r_pos.sum(-1);  // [N, T]
  return r_mem;
}

// Backward from the encoder's output (R_mem) to the source embeddings.
void encoder_backward(model::TransformerImpl& m, const ForwardTape& f, const torch::Tensor& r_mem,
                      double eps, RelevanceTrace* tr) {
  const bool pre = m.config().pre_norm;
  const auto tgt_total = tr->tgt_input.sum(1);
  auto mark = [&](const std::string& name, const torch::Tensor& r) {
    tr->frontier.emplace_back(name, total(r) + tgt_total);
  };
  const auto& t = f.trace;
  auto r = r_mem;
  if (pre) r = lrp_norm(*m.encoder_norm, t.encoder_out, r, eps);
  mark("encoder output", r);
  for (size_t l = m.encoder_layers.size(); l-- > 0;) {
    auto& L = *m.encoder_layers[l];
    r = ffn_block_backward(pre, *L.ffn_norm, *L.fc1, *L.fc2, t.encoder[l].ffn, r, eps);
    mark(fmt::format("encoder {} ffn", l), r);
    r = self_attention_backward(pre, *L.self_attn_norm, *L.self_attn, t.encoder[l].self_attn, r,
                                eps, &tr->heads[static_cast<int>(AttentionType::kEncSelf)][l]);
    mark(fmt::format("encoder {} self-attention", l), r);
  }
  const auto [r_tok, r_pos] = lrp_add(t.src_tokens, t.src_positions, r, eps);
  tr->src_input = r_tok.sum(-1) + r_pos.sum(-1);  // [N, S]
  tr->frontier.emplace_back("embeddings", tr->src_input.sum(1) + tgt_total);
}

}  // namespace

RelevanceTrace propagate_relevance(model::TransformerImpl& m, const torch::Tensor& src,
                                   const torch::Tensor& tgt_in, double eps) {
  torch::NoGradGuard no_grad;
  HC_CHECK(src.dim() == 1 && tgt_in.dim() == 1 && src.size(0) > 0 && tgt_in.size(0) > 0,
           "relevance: one sentence pair at a time (src [S], tgt_in [T])");
  // The feed-forward rule passes relevance through the active units of a ReLU (z+ of the linear
  // maps around it); GELU and SiLU have negative outputs it does not account for.
  HC_CHECK(m.config().activation == Activation::kRelu,
           "relevance: layer-wise relevance propagation is defined here for ReLU feed-forward "
           "layers; this model's model.activation is {} (the Voita et al. analysis applies to "
           "ReLU Transformers)",
           choice_name(m.config().activation));
  const ForwardTape f = forward(m, src, tgt_in);
  RelevanceTrace tr;
  tr.heads[static_cast<int>(AttentionType::kEncSelf)].resize(m.encoder_layers.size());
  tr.heads[static_cast<int>(AttentionType::kDecSelf)].resize(m.decoder_layers.size());
  tr.heads[static_cast<int>(AttentionType::kEncDec)].resize(m.decoder_layers.size());
  const auto r_mem = decoder_backward(m, f, eps, &tr);
  encoder_backward(m, f, r_mem, eps, &tr);
  return tr;
}

}  // namespace headcount::analysis
