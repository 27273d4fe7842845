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

// One attention layer's forward pass for one sentence, keeping what the backward pass needs.
struct AttentionTape {
  torch::Tensor kv_in;   // [S, D]
  torch::Tensor alpha;   // [H, T, S]
  torch::Tensor v;       // [H, S, Dh]
  torch::Tensor merged;  // [T, H*Dh] head outputs, head-major
};

torch::Tensor attention_forward(model::MultiheadAttentionImpl& a, const torch::Tensor& q_in,
                                const torch::Tensor& kv_in, const torch::Tensor& mask,
                                AttentionTape* tape) {
  const int64_t T = q_in.size(0), S = kv_in.size(0), D = a.d_model();
  const int64_t H = a.num_heads(), Dh = a.head_dim(), HD = H * Dh;
  tape->kv_in = kv_in;
  if (H == 0) return a.out_proj_bias.expand({T, D}).clone();
  const auto& w = a.in_proj_weight;
  const auto& b = a.in_proj_bias;
  auto heads = [&](const torch::Tensor& x, int64_t block, int64_t L) {
    return torch::linear(x, w.narrow(0, block * HD, HD), b.narrow(0, block * HD, HD))
        .view({L, H, Dh})
        .transpose(0, 1);  // [H, L, Dh]
  };
  const auto q = heads(q_in, 0, T), k = heads(kv_in, 1, S), v = heads(kv_in, 2, S);
  auto scores = torch::matmul(q / std::sqrt(static_cast<double>(Dh)), k.transpose(-2, -1));
  if (mask.defined()) scores = scores + mask;
  tape->alpha = torch::softmax(scores, -1);
  tape->v = v;
  tape->merged = torch::matmul(tape->alpha, v).transpose(0, 1).reshape({T, HD});
  return torch::linear(tape->merged, a.out_proj_weight, a.out_proj_bias);
}

// R_out [N, T, D] -> relevance of the key/value input [N, S, D]; `head` gets [N, H].
torch::Tensor attention_backward(model::MultiheadAttentionImpl& a, const AttentionTape& tape,
                                 const torch::Tensor& r_out, double eps, torch::Tensor* head) {
  const int64_t N = r_out.size(0), T = r_out.size(1), S = tape.kv_in.size(0);
  const int64_t H = a.num_heads(), Dh = a.head_dim(), HD = H * Dh;
  if (H == 0) {  // everything is the output bias's
    *head = torch::zeros({N, 0}, r_out.options());
    return torch::zeros({N, S, a.d_model()}, r_out.options());
  }
  const auto r_merged = lrp_linear(tape.merged, a.out_proj_weight, a.out_proj_bias, r_out, eps);
  const auto r_c = r_merged.view({N, T, H, Dh}).permute({0, 2, 1, 3});  // [N, H, T, Dh]
  *head = r_c.sum({2, 3});
  const auto r_v = lrp_attention_values(tape.alpha, tape.v, r_c, eps);  // [N, H, S, Dh]
  return lrp_linear(tape.kv_in, a.in_proj_weight.narrow(0, 2 * HD, HD),
                    a.in_proj_bias.narrow(0, 2 * HD, HD),
                    r_v.permute({0, 2, 1, 3}).reshape({N, S, HD}), eps);
}

struct FfnTape {
  torch::Tensor x, h;  // input [L, D], ReLU output [L, F]
};

torch::Tensor ffn_forward(torch::nn::LinearImpl& fc1, torch::nn::LinearImpl& fc2,
                          const torch::Tensor& x, FfnTape* tape) {
  tape->x = x;
  tape->h = torch::relu(torch::linear(x, fc1.weight, fc1.bias));
  return torch::linear(tape->h, fc2.weight, fc2.bias);
}

torch::Tensor ffn_backward(torch::nn::LinearImpl& fc1, torch::nn::LinearImpl& fc2,
                           const FfnTape& tape, const torch::Tensor& r, double eps) {
  // ReLU passes relevance through: what reaches an inactive unit is already zero (h = 0).
  const auto r_h = lrp_linear(tape.h, fc2.weight, fc2.bias, r, eps);
  return lrp_linear(tape.x, fc1.weight, fc1.bias, r_h, eps);
}

torch::Tensor layer_norm(torch::nn::LayerNormImpl& ln, const torch::Tensor& x) {
  return torch::layer_norm(x, {x.size(-1)}, ln.weight, ln.bias, ln.options.eps());
}
torch::Tensor lrp_norm(torch::nn::LayerNormImpl& ln, const torch::Tensor& y, const torch::Tensor& r,
                       double eps) {
  return lrp_layer_norm(y, ln.weight, ln.bias, ln.options.eps(), r, eps);
}

// A residual sublayer: post-norm out = LN(x + F(x)), pre-norm out = x + F(LN(x)).
struct SublayerTape {
  torch::Tensor x, f;  // the residual input and the sublayer's output
  torch::Tensor sum;   // x + f (post-norm: the layer norm's input)
};

// Backward through the residual and (post-norm) the norm; returns (R_x through the residual,
// R_f for the sublayer).
std::pair<torch::Tensor, torch::Tensor> residual_backward(bool pre_norm,
                                                          torch::nn::LayerNormImpl& ln,
                                                          const SublayerTape& t,
                                                          const torch::Tensor& r, double eps) {
  const auto r_sum = pre_norm ? r : lrp_norm(ln, t.sum, r, eps);
  return lrp_add(t.x, t.f, r_sum, eps);
}

// The sublayer's input as F sees it: pre-norm LN(x) (relevance back through the norm), post-norm x.
torch::Tensor sub_input(bool pre_norm, torch::nn::LayerNormImpl& ln, const torch::Tensor& x) {
  return pre_norm ? layer_norm(ln, x) : x;
}
torch::Tensor sub_input_backward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                 const torch::Tensor& x, const torch::Tensor& r, double eps) {
  return pre_norm ? lrp_norm(ln, x, r, eps) : r;
}
torch::Tensor sub_output(bool pre_norm, torch::nn::LayerNormImpl& ln, SublayerTape* t) {
  t->sum = t->x + t->f;
  return pre_norm ? t->sum : layer_norm(ln, t->sum);
}

// The two sublayers encoder and decoder layers share: self-attention and feed-forward, each with
// its residual connection and layer norm.
struct SelfAttentionBlock {
  SublayerTape res;
  AttentionTape att;
};
torch::Tensor self_attention_forward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                     model::MultiheadAttentionImpl& a, const torch::Tensor& x,
                                     const torch::Tensor& mask, SelfAttentionBlock* b) {
  b->res.x = x;
  const auto in = sub_input(pre_norm, ln, x);
  b->res.f = attention_forward(a, in, in, mask, &b->att);
  return sub_output(pre_norm, ln, &b->res);
}
torch::Tensor self_attention_backward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                      model::MultiheadAttentionImpl& a, const SelfAttentionBlock& b,
                                      const torch::Tensor& r, double eps, torch::Tensor* head) {
  const auto [r_res, r_f] = residual_backward(pre_norm, ln, b.res, r, eps);
  return r_res + sub_input_backward(pre_norm, ln, b.res.x,
                                    attention_backward(a, b.att, r_f, eps, head), eps);
}

struct FfnBlock {
  SublayerTape res;
  FfnTape ffn;
};
torch::Tensor ffn_block_forward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                torch::nn::LinearImpl& fc1, torch::nn::LinearImpl& fc2,
                                const torch::Tensor& x, FfnBlock* b) {
  b->res.x = x;
  b->res.f = ffn_forward(fc1, fc2, sub_input(pre_norm, ln, x), &b->ffn);
  return sub_output(pre_norm, ln, &b->res);
}
torch::Tensor ffn_block_backward(bool pre_norm, torch::nn::LayerNormImpl& ln,
                                 torch::nn::LinearImpl& fc1, torch::nn::LinearImpl& fc2,
                                 const FfnBlock& b, const torch::Tensor& r, double eps) {
  const auto [r_res, r_f] = residual_backward(pre_norm, ln, b.res, r, eps);
  return r_res +
         sub_input_backward(pre_norm, ln, b.res.x, ffn_backward(fc1, fc2, b.ffn, r_f, eps), eps);
}

torch::Tensor total(const torch::Tensor& r) {
  return r.flatten(1).sum(1);  // [N]
}

// Everything the forward pass keeps for the backward pass of one sentence pair.
struct ForwardTape {
  int64_t S = 0, T = 0, D = 0;
  torch::Tensor src_tok, src_pos, tgt_tok, tgt_pos;  // scaled embeddings, positions
  std::vector<SelfAttentionBlock> enc_att, dec_self;
  std::vector<FfnBlock> enc_ffn, dec_ffn;
  std::vector<SublayerTape> dec_cross;
  std::vector<AttentionTape> dec_cross_t;
  torch::Tensor enc_out, memory, dec_out, final_h, logits;
};

// Token embeddings scaled by sqrt(D) [L, D] and the sinusoidal positions [L, D] of `ids`, kept
// apart (relevance reaches each), as the model embeds them.
void embed(model::TransformerImpl& m, torch::nn::EmbeddingImpl& table, const torch::Tensor& ids,
           int64_t L, int64_t D, torch::Tensor* tok, torch::Tensor* pos) {
  const auto dev = m.output_weight.device();
  *tok = table.weight.index_select(0, ids.to(dev)) * std::sqrt(static_cast<double>(D));
  *pos = model::sinusoidal_positions(L, D).to(dev, m.output_weight.scalar_type());
}

void encoder_forward(model::TransformerImpl& m, const torch::Tensor& src, ForwardTape* f) {
  const bool pre = m.config().pre_norm;
  embed(m, *m.src_embed, src, f->S, f->D, &f->src_tok, &f->src_pos);
  auto x = f->src_tok + f->src_pos;
  const size_t n_enc = m.encoder_layers.size();
  f->enc_att.resize(n_enc);
  f->enc_ffn.resize(n_enc);
  for (size_t l = 0; l < n_enc; ++l) {
    auto& L = *m.encoder_layers[l];
    x = self_attention_forward(pre, *L.self_attn_norm, *L.self_attn, x, {}, &f->enc_att[l]);
    x = ffn_block_forward(pre, *L.ffn_norm, *L.fc1, *L.fc2, x, &f->enc_ffn[l]);
  }
  f->enc_out = x;
  f->memory = pre ? layer_norm(*m.encoder_norm, f->enc_out) : f->enc_out;
}

void decoder_forward(model::TransformerImpl& m, const torch::Tensor& tgt_in, ForwardTape* f) {
  const bool pre = m.config().pre_norm;
  embed(m, *m.tgt_embed, tgt_in, f->T, f->D, &f->tgt_tok, &f->tgt_pos);
  auto x = f->tgt_tok + f->tgt_pos;
  const auto causal =
      model::causal_bias(f->T, m.output_weight.device()).to(m.output_weight.scalar_type());
  const size_t n_dec = m.decoder_layers.size();
  f->dec_self.resize(n_dec);
  f->dec_cross.resize(n_dec);
  f->dec_cross_t.resize(n_dec);
  f->dec_ffn.resize(n_dec);
  for (size_t l = 0; l < n_dec; ++l) {
    auto& L = *m.decoder_layers[l];
    x = self_attention_forward(pre, *L.self_attn_norm, *L.self_attn, x, causal, &f->dec_self[l]);
    f->dec_cross[l].x = x;
    f->dec_cross[l].f = attention_forward(*L.cross_attn, sub_input(pre, *L.cross_attn_norm, x),
                                          f->memory, {}, &f->dec_cross_t[l]);
    x = sub_output(pre, *L.cross_attn_norm, &f->dec_cross[l]);
    x = ffn_block_forward(pre, *L.ffn_norm, *L.fc1, *L.fc2, x, &f->dec_ffn[l]);
  }
  f->dec_out = x;
  f->final_h = pre ? layer_norm(*m.decoder_norm, f->dec_out) : f->dec_out;
  f->logits = torch::linear(f->final_h, m.output_weight);  // [T, V]
}

// Backward from the top-1 logits to the decoder's embeddings; returns the relevance that reached
// the encoder's output through the encoder-decoder attention, R_mem [N, S, D].
torch::Tensor decoder_backward(model::TransformerImpl& m, const ForwardTape& f, double eps,
                               RelevanceTrace* tr) {
  const bool pre = m.config().pre_norm;
  const auto [top, top_id] = f.logits.max(-1);
  // Output position n starts with its top-1 logit, z = h_n . W[k].
  tr->top = top;
  const auto contrib = f.final_h * m.output_weight.index_select(0, top_id);  // [T, D]
  const auto start = contrib * (top / lrp_stabilize(top, eps)).unsqueeze(-1);
  auto r = torch::eye(f.T, f.final_h.options()).unsqueeze(-1) * start.unsqueeze(0);  // [N, T, D]
  const int64_t N = f.T;
  auto r_mem = torch::zeros({N, f.S, f.D}, r.options());
  auto mark = [&](const std::string& name) {
    tr->frontier.emplace_back(name, total(r) + total(r_mem));
  };
  if (pre) r = lrp_norm(*m.decoder_norm, f.dec_out, r, eps);
  mark("decoder output");
  for (size_t l = m.decoder_layers.size(); l-- > 0;) {
    auto& L = *m.decoder_layers[l];
    r = ffn_block_backward(pre, *L.ffn_norm, *L.fc1, *L.fc2, f.dec_ffn[l], r, eps);
    mark(fmt::format("decoder {} ffn", l));
    // Encoder-decoder attention: the queries receive nothing, the memory the values' share.
    const auto [r_res, r_f] = residual_backward(pre, *L.cross_attn_norm, f.dec_cross[l], r, eps);
    r_mem = r_mem + attention_backward(*L.cross_attn, f.dec_cross_t[l], r_f, eps,
                                       &tr->heads[static_cast<int>(AttentionType::kEncDec)][l]);
    r = r_res;
    mark(fmt::format("decoder {} enc-dec attention", l));
    r = self_attention_backward(pre, *L.self_attn_norm, *L.self_attn, f.dec_self[l], r, eps,
                                &tr->heads[static_cast<int>(AttentionType::kDecSelf)][l]);
    mark(fmt::format("decoder {} self-attention", l));
  }
  const auto [r_tok, r_pos] = lrp_add(f.tgt_tok, f.tgt_pos, r, eps);
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
  auto r = r_mem;
  if (pre) r = lrp_norm(*m.encoder_norm, f.enc_out, r, eps);
  mark("encoder output", r);
  for (size_t l = m.encoder_layers.size(); l-- > 0;) {
    auto& L = *m.encoder_layers[l];
    r = ffn_block_backward(pre, *L.ffn_norm, *L.fc1, *L.fc2, f.enc_ffn[l], r, eps);
    mark(fmt::format("encoder {} ffn", l), r);
    r = self_attention_backward(pre, *L.self_attn_norm, *L.self_attn, f.enc_att[l], r, eps,
                                &tr->heads[static_cast<int>(AttentionType::kEncSelf)][l]);
    mark(fmt::format("encoder {} self-attention", l), r);
  }
  const auto [r_tok, r_pos] = lrp_add(f.src_tok, f.src_pos, r, eps);
  tr->src_input = r_tok.sum(-1) + r_pos.sum(-1);  // [N, S]
  tr->frontier.emplace_back("embeddings", tr->src_input.sum(1) + tgt_total);
}

}  // namespace

RelevanceTrace propagate_relevance(model::TransformerImpl& m, const torch::Tensor& src,
                                   const torch::Tensor& tgt_in, double eps) {
  torch::NoGradGuard no_grad;
  HC_CHECK(src.dim() == 1 && tgt_in.dim() == 1 && src.size(0) > 0 && tgt_in.size(0) > 0,
           "relevance: one sentence pair at a time (src [S], tgt_in [T])");
  ForwardTape f;
  f.S = src.size(0);
  f.T = tgt_in.size(0);
  f.D = m.config().d_model;
  encoder_forward(m, src, &f);
  decoder_forward(m, tgt_in, &f);
  RelevanceTrace tr;
  tr.heads[static_cast<int>(AttentionType::kEncSelf)].resize(m.encoder_layers.size());
  tr.heads[static_cast<int>(AttentionType::kDecSelf)].resize(m.decoder_layers.size());
  tr.heads[static_cast<int>(AttentionType::kEncDec)].resize(m.decoder_layers.size());
  const auto r_mem = decoder_backward(m, f, eps, &tr);
  encoder_backward(m, f, r_mem, eps, &tr);
  return tr;
}

}  // namespace headcount::analysis
