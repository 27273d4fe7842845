// Greedy and batched beam search with a GNMT length penalty and a maximum output length
// offset + ratio * source length. Search runs on a StepModel, so it can be tested on hand-made
// distributions; TransformerStepper is the real model with cached keys and values.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/model/transformer.h"

namespace headcount::decode {

struct SearchOptions {
  int beam = 4;
  double length_penalty = 0.6;  // GNMT alpha: score = log P / ((5 + |Y|) / 6)^alpha
  double max_len_offset = 10;
  double max_len_ratio = 1.5;
  std::string precision = "fp32";  // auto | fp32 | bf16 (decode.precision), resolved per device
  static SearchOptions from(const DecodeConfig& c);
  int64_t max_length(int64_t source_length) const;
};

// The model as beam search sees it: rows of partial outputs, one new token each step. The
// search keeps its bookkeeping on the host: `last_tokens` and `index` are CPU tensors, which a
// model on another device moves there itself; step() may return its rows on any device.
class StepModel {
 public:
  virtual ~StepModel() = default;
  // Log-probabilities [N, V] of the next token of each row, given each row's last token [N]
  // (BOS at the first step).
  virtual torch::Tensor step(const torch::Tensor& last_tokens) = 0;
  // Keeps rows `index` (in that order) of the internal state: the row count may shrink.
  virtual void reorder(const torch::Tensor& index) = 0;
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // without BOS and EOS
  double log_prob = 0;          // sum of token log-probabilities, EOS included
  double score = 0;             // log_prob / length penalty
};

// GNMT's length penalty ((5 + length) / 6)^alpha; length counts EOS.
double length_penalty(int64_t length, double alpha);

// `max_lens[b]`: the most tokens sentence b may produce before EOS is forced.
// The StepModel starts with batch * beam rows (beam 1 for greedy), sentence b in rows b*beam...;
// once a sentence ends, its rows are dropped through reorder() (an index with fewer rows), so
// the model only computes rows of sentences still running.
std::vector<Hypothesis> greedy_search(StepModel& model, const std::vector<int64_t>& max_lens);
std::vector<Hypothesis> beam_search(StepModel& model, const std::vector<int64_t>& max_lens,
                                    int beam, double alpha);

class TransformerStepper : public StepModel {
 public:
  // src [B, S] padded, on the host or the model's device (it is moved there); the encoder runs
  // once and its output is repeated for every beam.
  TransformerStepper(model::Transformer& model, const torch::Tensor& src, int64_t beam);
  torch::Tensor step(const torch::Tensor& last_tokens) override;
  void reorder(const torch::Tensor& index) override;

 private:
  model::Transformer model_;
  model::EncoderOutput enc_;
  model::DecoderState state_;
};

// Translates sentences given as subword ids (without EOS); returns output ids (without BOS/EOS)
// in input order. Sentences are sorted by length into batches of `batch_size`.
std::vector<std::vector<int64_t>> translate_ids(model::Transformer& model,
                                                const std::vector<std::vector<int>>& sources,
                                                const SearchOptions& options, int batch_size,
                                                const torch::Device& device);

}  // namespace headcount::decode
