#include "headcount/model/transformer.h"

#include <fmt/ranges.h>
#include <torch/nn/functional.h>
#include <torch/nn/init.h>

#include <cmath>
#include <map>

#include "headcount/common/check.h"
#include "headcount/data/vocab.h"
#include "headcount/model/dropout.h"

namespace headcount::model {

namespace F = torch::nn::functional;

// Built once in double on the host; positions() and the relevance pass move it to the model's
// device.
torch::Tensor sinusoidal_positions(int64_t length, int64_t dim, PositionLayout layout) {
  if (layout == PositionLayout::kHalves) {
    // Feature i < ceil(d/2): sin(pos / 10000^(2i/d)); feature ceil(d/2) + i: cos of the same
    // (HF MarianSinusoidalPositionalEmbedding).
    const int64_t half = (dim + 1) / 2;
    auto pos = torch::arange(length, torch::kFloat64).unsqueeze(1);  // device: cpu (host table)
    auto i = torch::arange(0, dim, 2, torch::kFloat64);              // device: cpu (host table)
    auto angle = pos / torch::pow(10000.0, i / static_cast<double>(dim));  // [L, half]
    auto table = torch::cat({torch::sin(angle), torch::cos(angle).narrow(1, 0, dim - half)}, 1);
    return table.to(torch::kFloat32);
  }
  auto pos =
      torch::arange(length, torch::kFloat64).unsqueeze(1);  // [L, 1] device: cpu (host table)
  auto i = torch::arange(0, dim, 2, torch::kFloat64);       // [dim/2] device: cpu (host table)
  auto angle = pos / torch::pow(10000.0, i / static_cast<double>(dim));  // [L, dim/2]
  auto table = torch::zeros({length, dim}, torch::kFloat64);             // device: cpu (host table)
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, dim, 2)},
                   torch::sin(angle));
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, dim, 2)},
                   torch::cos(angle).narrow(1, 0, dim / 2));
  return table.to(torch::kFloat32);
}

torch::Tensor causal_bias(int64_t length, const torch::Device& device) {
  auto full = torch::full({length, length}, -std::numeric_limits<float>::infinity(),
                          torch::TensorOptions().device(device));
  return torch::triu(full, 1);  // [T, T]
}

// ---------------------------------------------------------------------------------------------

EncoderLayerImpl::EncoderLayerImpl(const ModelConfig& c, int64_t heads, int64_t head_dim)
    : dropout_(c.dropout),
      activation_dropout_(c.activation_dropout),
      pre_norm_(c.pre_norm),
      activation_(c.activation) {
  self_attn = register_module(
      "self_attn", MultiheadAttention(c.d_model, heads, head_dim, c.attention_dropout, true));
  fc1 = register_module("fc1", torch::nn::Linear(c.d_model, c.ffn_dim));
  fc2 = register_module("fc2", torch::nn::Linear(c.ffn_dim, c.d_model));
  self_attn_norm = register_module("self_attn_norm",
                                   torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  ffn_norm =
      register_module("ffn_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
}

torch::Tensor sublayer_input(torch::nn::LayerNormImpl& norm, const torch::Tensor& x,
                             bool pre_norm) {
  return pre_norm ? norm.forward(x) : x;
}

torch::Tensor sublayer_output(torch::nn::LayerNormImpl& norm, const torch::Tensor& x,
                              const torch::Tensor& f, bool pre_norm) {
  const auto sum = x + f;
  return pre_norm ? sum : norm.forward(sum);
}

namespace {

// One residual sublayer: `f` reads the sublayer's input and fills the trace's own fields.
template <typename F>
torch::Tensor residual(torch::nn::LayerNormImpl& norm, bool pre_norm, double dropout, bool train,
                       const torch::Tensor& x, SublayerTrace* trace, F&& f) {
  const auto in = sublayer_input(norm, x, pre_norm);
  const auto h = model::dropout(f(in), dropout, train);
  if (trace) {
    trace->x = x;
    trace->input = in;
    trace->f = h;
  }
  return sublayer_output(norm, x, h, pre_norm);
}

// The attention sublayer (self-attention when `memory` is undefined) and the feed-forward
// sublayer, as encoder and decoder layers both run them.
torch::Tensor attention_sublayer(torch::nn::LayerNormImpl& norm, MultiheadAttentionImpl& attn,
                                 bool pre_norm, double dropout, bool train, const torch::Tensor& x,
                                 const torch::Tensor& memory, const torch::Tensor& bias,
                                 KVCache* cache, SublayerTrace* trace) {
  return residual(norm, pre_norm, dropout, train, x, trace, [&](const torch::Tensor& in) {
    return attn.forward(in, memory.defined() ? memory : in, bias, cache,
                        trace ? &trace->attention : nullptr);
  });
}

torch::Tensor activate(const torch::Tensor& x, Activation a) {
  switch (a) {
    case Activation::kGelu:
      return torch::gelu(x);
    case Activation::kSwish:
      return torch::silu(x);
    case Activation::kRelu:
      break;
  }
  return torch::relu(x);
}

// The position-wise feed-forward network fc2(drop(act(fc1(x)))) with its residual connection.
torch::Tensor feed_forward_sublayer(torch::nn::LayerNormImpl& norm, torch::nn::LinearImpl& fc1,
                                    torch::nn::LinearImpl& fc2, bool pre_norm, double dropout,
                                    double activation_dropout, Activation activation, bool train,
                                    const torch::Tensor& x, SublayerTrace* trace) {
  return residual(norm, pre_norm, dropout, train, x, trace, [&](const torch::Tensor& in) {
    auto h = activate(fc1.forward(in), activation);
    if (trace) trace->hidden = h;
    if (activation_dropout > 0) h = model::dropout(h, activation_dropout, train);
    return fc2.forward(h);
  });
}

}  // namespace

torch::Tensor EncoderLayerImpl::self_attention_block(const torch::Tensor& x,
                                                     const torch::Tensor& bias,
                                                     SublayerTrace* trace) {
  return attention_sublayer(*self_attn_norm, *self_attn, pre_norm_, dropout_, is_training(), x, {},
                            bias, nullptr, trace);
}

torch::Tensor EncoderLayerImpl::feed_forward_block(const torch::Tensor& x, SublayerTrace* trace) {
  return feed_forward_sublayer(*ffn_norm, *fc1, *fc2, pre_norm_, dropout_, activation_dropout_,
                               activation_, is_training(), x, trace);
}

torch::Tensor EncoderLayerImpl::forward(torch::Tensor x, const torch::Tensor& bias,
                                        EncoderLayerTrace* trace) {
  x = self_attention_block(x, bias, trace ? &trace->self_attn : nullptr);
  return feed_forward_block(x, trace ? &trace->ffn : nullptr);  // [B, S, D]
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c, int64_t self_heads, int64_t cross_heads,
                                   int64_t head_dim)
    : dropout_(c.dropout),
      activation_dropout_(c.activation_dropout),
      pre_norm_(c.pre_norm),
      activation_(c.activation) {
  self_attn = register_module(
      "self_attn", MultiheadAttention(c.d_model, self_heads, head_dim, c.attention_dropout, true));
  cross_attn = register_module("cross_attn", MultiheadAttention(c.d_model, cross_heads, head_dim,
                                                                c.attention_dropout, false));
  fc1 = register_module("fc1", torch::nn::Linear(c.d_model, c.ffn_dim));
  fc2 = register_module("fc2", torch::nn::Linear(c.ffn_dim, c.d_model));
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})); };
  self_attn_norm = register_module("self_attn_norm", ln());
  cross_attn_norm = register_module("cross_attn_norm", ln());
  ffn_norm = register_module("ffn_norm", ln());
}

torch::Tensor DecoderLayerImpl::self_attention_block(const torch::Tensor& x,
                                                     const torch::Tensor& bias, KVCache* cache,
                                                     SublayerTrace* trace) {
  return attention_sublayer(*self_attn_norm, *self_attn, pre_norm_, dropout_, is_training(), x, {},
                            bias, cache, trace);
}

torch::Tensor DecoderLayerImpl::cross_attention_block(const torch::Tensor& x,
                                                      const torch::Tensor& memory,
                                                      const torch::Tensor& bias, KVCache* cache,
                                                      SublayerTrace* trace) {
  return attention_sublayer(*cross_attn_norm, *cross_attn, pre_norm_, dropout_, is_training(), x,
                            memory, bias, cache, trace);
}

torch::Tensor DecoderLayerImpl::feed_forward_block(const torch::Tensor& x, SublayerTrace* trace) {
  return feed_forward_sublayer(*ffn_norm, *fc1, *fc2, pre_norm_, dropout_, activation_dropout_,
                               activation_, is_training(), x, trace);
}

torch::Tensor DecoderLayerImpl::forward(torch::Tensor x, const torch::Tensor& memory,
                                        const torch::Tensor& self_bias,
                                        const torch::Tensor& cross_bias, DecoderLayerCache* cache,
                                        DecoderLayerTrace* trace) {
  x = self_attention_block(x, self_bias, cache ? &cache->self_attn : nullptr,
                           trace ? &trace->self_attn : nullptr);
  x = cross_attention_block(x, memory, cross_bias, cache ? &cache->cross_attn : nullptr,
                            trace ? &trace->cross_attn : nullptr);
  return feed_forward_block(x, trace ? &trace->ffn : nullptr);  // [B, T, D]
}

void DecoderState::reorder(const torch::Tensor& index) {
  for (auto& l : layers) {
    for (KVCache* c : {&l.self_attn, &l.cross_attn}) {
      if (c->k.defined()) {
        // The search builds its row index on the host; the cache is on the model's device.
        const auto rows = index.to(c->k.device());
        c->k = c->k.index_select(0, rows);
        c->v = c->v.index_select(0, rows);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

TransformerImpl::TransformerImpl(const ModelConfig& c, const Architecture& arch, int64_t src_vocab,
                                 int64_t tgt_vocab)
    : config_(c), arch_(arch) {
  arch.check_against(c);
  HC_CHECK(!c.tie_embeddings || src_vocab == tgt_vocab,
           "tied embeddings need one vocabulary, got {} source and {} target pieces", src_vocab,
           tgt_vocab);
  const double emb_std = std::pow(static_cast<double>(c.d_model), -0.5);
  auto make_embedding = [&](int64_t vocab) {
    auto e = torch::nn::Embedding(
        torch::nn::EmbeddingOptions(vocab, c.d_model).padding_idx(data::kPadId));
    torch::NoGradGuard no_grad;
    torch::nn::init::normal_(e->weight, 0.0, emb_std);
    e->weight[data::kPadId].zero_();
    return e;
  };
  src_embed = register_module("src_embed", make_embedding(src_vocab));
  if (c.tie_embeddings) {
    tgt_embed = src_embed;
    output_weight = src_embed->weight;
  } else {
    tgt_embed = register_module("tgt_embed", make_embedding(tgt_vocab));
    // device: cpu (a parameter, moved with its module)
    const auto initial = torch::randn({tgt_vocab, c.d_model}) * emb_std;
    output_weight = register_parameter("output_projection_weight", initial);
  }
  // Parameter names: encoder.{i}.self_attn.in_proj_weight, decoder.{i}.cross_attn..., etc.
  auto encoder = register_module("encoder", torch::nn::ModuleList());
  for (int i = 0; i < c.encoder_layers; ++i) {
    encoder_layers.push_back(EncoderLayer(c, arch.enc_self[i], arch.head_dim));
    encoder->push_back(encoder_layers.back());
  }
  auto decoder = register_module("decoder", torch::nn::ModuleList());
  for (int i = 0; i < c.decoder_layers; ++i) {
    decoder_layers.push_back(DecoderLayer(c, arch.dec_self[i], arch.enc_dec[i], arch.head_dim));
    decoder->push_back(decoder_layers.back());
  }
  if (c.pre_norm) {
    encoder_norm = register_module("encoder_norm",
                                   torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
    decoder_norm = register_module("decoder_norm",
                                   torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  }
  position_table_ = sinusoidal_positions(c.max_positions, c.d_model, c.positions);
  if (c.output_bias) {
    // device: cpu (a parameter, moved with its module)
    output_bias = register_parameter("output_bias", torch::zeros({tgt_vocab}));
  }
}

torch::Tensor TransformerImpl::positions(int64_t offset, int64_t length,
                                         const torch::Device& device) {
  HC_CHECK(offset + length <= config_.max_positions,
           "sequence of {} positions is longer than model.max_positions ({})", offset + length,
           config_.max_positions);
  if (position_table_.device() != device) position_table_ = position_table_.to(device);
  return position_table_.narrow(0, offset, length);  // [L, D]
}

torch::Tensor TransformerImpl::embed(torch::nn::Embedding& table, const torch::Tensor& tokens,
                                     int64_t offset, torch::Tensor* tokens_out,
                                     torch::Tensor* positions_out) {
  const auto tok = table(tokens) * std::sqrt(static_cast<double>(config_.d_model));  // [B, L, D]
  const auto pos = positions(offset, tokens.size(1), tokens.device());               // [L, D]
  if (tokens_out) *tokens_out = tok;
  if (positions_out) *positions_out = pos.to(tok.scalar_type()).expand_as(tok);
  return model::dropout(tok + pos, config_.dropout, is_training());
}

torch::Tensor TransformerImpl::finish_encoder(const torch::Tensor& x) {
  return config_.pre_norm ? encoder_norm(x) : x;
}

torch::Tensor TransformerImpl::finish_decoder(const torch::Tensor& x) {
  return config_.pre_norm ? decoder_norm(x) : x;
}

torch::Tensor TransformerImpl::source_bias(const torch::Tensor& src) {
  const auto pad = src.eq(data::kPadId);  // [B, S]
  return torch::zeros(pad.sizes(), torch::TensorOptions().device(src.device()))
      .masked_fill(pad, -std::numeric_limits<float>::infinity())
      .view({src.size(0), 1, 1, src.size(1)});  // [B, 1, 1, S]
}

EncoderOutput TransformerImpl::encode(const torch::Tensor& src, ForwardTrace* trace) {
  EncoderOutput out;
  out.src_lengths = src.size(1) - src.eq(data::kPadId).sum(1);
  out.bias = source_bias(src);
  if (trace) trace->encoder.assign(encoder_layers.size(), {});
  auto x = trace ? embed(src_embed, src, 0, &trace->src_tokens, &trace->src_positions)
                 : embed_source(src);
  for (size_t i = 0; i < encoder_layers.size(); ++i)
    x = encoder_layers[i]->forward(x, out.bias, trace ? &trace->encoder[i] : nullptr);
  out.memory = finish_encoder(x);
  if (trace) {
    trace->encoder_out = x;
    trace->memory = out.memory;
  }
  return out;
}

DecoderState TransformerImpl::start_state() const {
  DecoderState s;
  s.layers.resize(decoder_layers.size());
  return s;
}

torch::Tensor TransformerImpl::decode(const torch::Tensor& tgt_in, const EncoderOutput& enc,
                                      DecoderState* state, ForwardTrace* trace) {
  const int64_t offset = state ? state->steps : 0;
  const int64_t T = tgt_in.size(1);
  if (trace) trace->decoder.assign(decoder_layers.size(), {});
  auto x = trace ? embed(tgt_embed, tgt_in, offset, &trace->tgt_tokens, &trace->tgt_positions)
                 : embed_target(tgt_in, offset);
  // One new position attends to every cached one: no mask needed.
  torch::Tensor self_bias = (state && T == 1) ? torch::Tensor() : causal_bias(T, tgt_in.device());
  HC_CHECK(!state || offset == 0 || T == 1, "incremental decoding takes one position at a time");
  for (size_t i = 0; i < decoder_layers.size(); ++i) {
    x = decoder_layers[i]->forward(x, enc.memory, self_bias, enc.bias,
                                   state ? &state->layers[i] : nullptr,
                                   trace ? &trace->decoder[i] : nullptr);
  }
  if (trace) trace->decoder_out = x;
  x = finish_decoder(x);
  if (trace) trace->final_hidden = x;
  if (state) state->steps += T;
  return torch::linear(x, output_weight, output_bias);  // [B, T, V]
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  return decode(tgt_in, encode(src));
}

std::vector<MultiheadAttention> TransformerImpl::attention_layers(AttentionType t) const {
  std::vector<MultiheadAttention> out;
  if (t == AttentionType::kEncSelf) {
    for (const auto& l : encoder_layers) out.push_back(l->self_attn);
  } else {
    for (const auto& l : decoder_layers) {
      out.push_back(t == AttentionType::kDecSelf ? l->self_attn : l->cross_attn);
    }
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> named_weights(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : m.named_parameters(true)) out.emplace_back(item.key(), item.value());
  return out;
}

void load_weights(torch::nn::Module& m,
                  const std::vector<std::pair<std::string, torch::Tensor>>& weights,
                  const std::string& origin) {
  std::map<std::string, torch::Tensor> given(weights.begin(), weights.end());
  torch::NoGradGuard no_grad;
  for (auto& item : m.named_parameters(true)) {
    const auto it = given.find(item.key());
    HC_CHECK(it != given.end(), "{}: no weight '{}' (a checkpoint of another architecture?)",
             origin, item.key());
    HC_CHECK(it->second.sizes() == item.value().sizes(),
             "{}: weight '{}' has shape {} but the model expects {} (a checkpoint of another "
             "architecture?)",
             origin, item.key(), fmt::format("{}", fmt::join(it->second.sizes(), "x")),
             fmt::format("{}", fmt::join(item.value().sizes(), "x")));
    item.value().copy_(it->second);
    given.erase(it);
  }
  HC_CHECK(given.empty(), "{}: unexpected weight '{}' (a checkpoint of another architecture?)",
           origin, given.empty() ? "" : given.begin()->first);
}

}  // namespace headcount::model
