// Token-based batches from length-bucketed data, shuffled by seed and epoch, shardable by rank.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"

namespace headcount::data {

struct Example {
  std::vector<int> src;  // subword ids, without EOS
  std::vector<int> tgt;
  int64_t id = 0;  // line number in its split
};

struct Batch {
  torch::Tensor src;       // [B, S] source + EOS, padded
  torch::Tensor tgt_in;    // [B, T] BOS + target, padded
  torch::Tensor tgt_out;   // [B, T] target + EOS, padded
  int64_t src_tokens = 0;  // non-padding
  int64_t tgt_tokens = 0;
  std::vector<int64_t> ids;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
};

// Subword-encoded pairs; pairs longer than `max_len` on a side are dropped and counted.
std::vector<Example> encode_pairs(const ParallelText& text, const Vocab& src, const Vocab& tgt,
                                  int max_len, size_t* dropped = nullptr);

// Groups examples into batches of at most `max_tokens` (sentences x the longest side's padded
// length, EOS/BOS included). Examples are sorted by length with ties broken by `seed`, so
// batches hold similar lengths and little padding. Deterministic for a seed.
std::vector<std::vector<int64_t>> make_batches(const std::vector<Example>& examples,
                                               int64_t max_tokens, uint64_t seed);

// The order in which an epoch visits the batches: a permutation drawn from (seed, epoch).
std::vector<int64_t> epoch_order(int64_t num_batches, uint64_t seed, int64_t epoch);

// Builds the padded tensors of one batch.
Batch collate(const std::vector<Example>& examples, const std::vector<int64_t>& indices,
              const torch::Device& device);

}  // namespace headcount::data
