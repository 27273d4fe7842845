// The encoder-decoder Transformer (Vaswani et al. 2017): sinusoidal positions, embeddings scaled
// by sqrt(D) and optionally tied between source, target and output, post-norm or pre-norm layers,
// and every attention layer with its own number of heads (Architecture).
//
// Shapes: B batch, S source length, T target length, D model width, V vocabulary.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <vector>

#include "headcount/common/config.h"
#include "headcount/model/architecture.h"
#include "headcount/model/attention.h"

namespace headcount::model {

// What one residual sublayer computed, kept when a trace is passed (relevance propagation reads
// it back). Post-norm: out = LN(x + f(x)); pre-norm: out = x + f(LN(x)).
struct SublayerTrace {
  torch::Tensor x;           // the residual stream entering [B, L, D]
  torch::Tensor input;       // what f read: LN(x) pre-norm, x post-norm
  torch::Tensor f;           // f's output, after dropout (x + f: the post-norm norm's input)
  AttentionTrace attention;  // attention sublayers
  torch::Tensor hidden;      // feed-forward sublayers: the activation's output [B, L, F]
};
struct EncoderLayerTrace {
  SublayerTrace self_attn, ffn;
};
struct DecoderLayerTrace {
  SublayerTrace self_attn, cross_attn, ffn;
};
// A whole forward pass: encode() fills the source half, decode() the target half.
struct ForwardTrace {
  torch::Tensor src_tokens, src_positions;  // scaled embeddings and positions [B, S, D]
  torch::Tensor tgt_tokens, tgt_positions;  // [B, T, D]
  std::vector<EncoderLayerTrace> encoder;
  std::vector<DecoderLayerTrace> decoder;
  torch::Tensor encoder_out;   // the last encoder layer's output [B, S, D]
  torch::Tensor memory;        // what the decoder attends to (pre-norm: normed encoder_out)
  torch::Tensor decoder_out;   // the last decoder layer's output [B, T, D]
  torch::Tensor final_hidden;  // what the output projection reads (pre-norm: normed)
};

// The residual connection around a sublayer, in the model's norm placement: the sublayer's input
// (LN(x) pre-norm, x post-norm) and the stream after it (x + f pre-norm, LN(x + f) post-norm).
// Every layer is built from these; layer-by-layer passes (Fisher's reconstruction) use them too.
torch::Tensor sublayer_input(torch::nn::LayerNormImpl& norm, const torch::Tensor& x, bool pre_norm);
torch::Tensor sublayer_output(torch::nn::LayerNormImpl& norm, const torch::Tensor& x,
                              const torch::Tensor& f, bool pre_norm);

class EncoderLayerImpl : public torch::nn::Module {
 public:
  EncoderLayerImpl(const ModelConfig& c, int64_t heads, int64_t head_dim);
  // x [B, S, D]; bias [B, 1, 1, S] (padding). The two sublayers in order; forward is the pair.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& bias,
                        EncoderLayerTrace* trace = nullptr);
  torch::Tensor self_attention_block(const torch::Tensor& x, const torch::Tensor& bias,
                                     SublayerTrace* trace = nullptr);
  torch::Tensor feed_forward_block(const torch::Tensor& x, SublayerTrace* trace = nullptr);
  MultiheadAttention self_attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm self_attn_norm{nullptr}, ffn_norm{nullptr};

 private:
  double dropout_, activation_dropout_;
  bool pre_norm_;
  Activation activation_;
};
TORCH_MODULE(EncoderLayer);

// Per-layer state of incremental decoding.
struct DecoderLayerCache {
  KVCache self_attn, cross_attn;
};

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const ModelConfig& c, int64_t self_heads, int64_t cross_heads, int64_t head_dim);
  // x [B, T, D]; memory [B, S, D]; self_bias [T, T] causal (undefined when decoding one step);
  // cross_bias [B, 1, 1, S]
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& memory,
                        const torch::Tensor& self_bias, const torch::Tensor& cross_bias,
                        DecoderLayerCache* cache = nullptr, DecoderLayerTrace* trace = nullptr);
  // The three sublayers in order; forward is their sequence.
  torch::Tensor self_attention_block(const torch::Tensor& x, const torch::Tensor& bias,
                                     KVCache* cache = nullptr, SublayerTrace* trace = nullptr);
  torch::Tensor cross_attention_block(const torch::Tensor& x, const torch::Tensor& memory,
                                      const torch::Tensor& bias, KVCache* cache = nullptr,
                                      SublayerTrace* trace = nullptr);
  torch::Tensor feed_forward_block(const torch::Tensor& x, SublayerTrace* trace = nullptr);
  MultiheadAttention self_attn{nullptr}, cross_attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm self_attn_norm{nullptr}, cross_attn_norm{nullptr}, ffn_norm{nullptr};

 private:
  double dropout_, activation_dropout_;
  bool pre_norm_;
  Activation activation_;
};
TORCH_MODULE(DecoderLayer);

// What the decoder needs from the encoder, and the incremental state of a decode.
struct EncoderOutput {
  torch::Tensor memory;       // [B, S, D]
  torch::Tensor bias;         // [B, 1, 1, S], -inf at source padding
  torch::Tensor src_lengths;  // [B] (without padding)
};
struct DecoderState {
  std::vector<DecoderLayerCache> layers;
  int64_t steps = 0;  // target positions already decoded
  // Keeps only rows `index` (beam search reordering): every cache is index_select'ed on dim 0.
  void reorder(const torch::Tensor& index);
};

class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(const ModelConfig& config, const Architecture& arch, int64_t src_vocab,
                  int64_t tgt_vocab);

  // src [B, S] (int64, padded with kPadId) -> encoder output. With `trace`, every sublayer's
  // pieces are kept there (the source half of a ForwardTrace).
  EncoderOutput encode(const torch::Tensor& src, ForwardTrace* trace = nullptr);
  // tgt_in [B, T] -> logits [B, T, V]. With `state`, tgt_in holds only the new positions and the
  // caches grow (incremental decoding). With `trace`, the target half of the pass is kept.
  torch::Tensor decode(const torch::Tensor& tgt_in, const EncoderOutput& enc,
                       DecoderState* state = nullptr, ForwardTrace* trace = nullptr);
  // Teacher-forced logits [B, T, V].
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in);
  DecoderState start_state() const;
  // What enters the first encoder (decoder) layer: scaled embeddings plus positions (with
  // dropout in training), and the source's additive padding mask [B, 1, 1, S]. encode() and
  // decode() are these followed by the layers; exposed for layer-by-layer passes (Fisher's
  // sequential reconstruction).
  torch::Tensor embed_source(const torch::Tensor& src) { return embed(src_embed, src, 0); }
  torch::Tensor embed_target(const torch::Tensor& tgt_in, int64_t offset = 0) {
    return embed(tgt_embed, tgt_in, offset);
  }
  static torch::Tensor source_bias(const torch::Tensor& src);
  // After the last layer: the pre-norm model's final norm (identity post-norm).
  torch::Tensor finish_encoder(const torch::Tensor& x);
  torch::Tensor finish_decoder(const torch::Tensor& x);

  const Architecture& architecture() const { return arch_; }
  const ModelConfig& config() const { return config_; }
  // The attention layers of one type, in layer order.
  std::vector<MultiheadAttention> attention_layers(AttentionType t) const;

  torch::nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};
  torch::Tensor output_weight;  // [V, D]; the target embedding's weight when tied
  torch::Tensor output_bias;    // [V] with model.output_bias, else undefined
  std::vector<EncoderLayer> encoder_layers;
  std::vector<DecoderLayer> decoder_layers;
  torch::nn::LayerNorm encoder_norm{nullptr}, decoder_norm{nullptr};  // pre-norm only

 private:
  torch::Tensor embed(torch::nn::Embedding& table, const torch::Tensor& tokens, int64_t offset,
                      torch::Tensor* tokens_out = nullptr, torch::Tensor* positions_out = nullptr);
  torch::Tensor positions(int64_t offset, int64_t length, const torch::Device& device);
  ModelConfig config_;
  Architecture arch_;
  torch::Tensor position_table_;  // [max_positions, D], not a parameter
};
TORCH_MODULE(Transformer);

// Sinusoidal position encodings [length, dim] (model.positions): sin at even, cos at odd features
// (interleaved), or sin in the first ceil(dim/2) features and cos in the rest (halves).
torch::Tensor sinusoidal_positions(int64_t length, int64_t dim,
                                   PositionLayout layout = PositionLayout::kInterleaved);
// Additive causal mask [T, T]: 0 on and below the diagonal, -inf above.
torch::Tensor causal_bias(int64_t length, const torch::Device& device);

// Parameters as a flat name -> tensor map (what checkpoints store), and back. Loading checks
// names and shapes and names any mismatch.
std::vector<std::pair<std::string, torch::Tensor>> named_weights(const torch::nn::Module& m);
void load_weights(torch::nn::Module& m,
                  const std::vector<std::pair<std::string, torch::Tensor>>& weights,
                  const std::string& origin);

}  // namespace headcount::model
