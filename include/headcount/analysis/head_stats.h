// What a head does, from its attention weights (METHODS §5; Voita et al. 2019, Clark et al. 2019).
// Pure functions of attention matrices: one head over one sentence is `w` [T, S], row i the
// distribution of query i over the S keys (rows sum to 1, no padding).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace headcount::analysis {

// What is known about one sentence's keys (and queries).
struct SentenceKeys {
  int64_t eos = -1;           // index of the EOS key, -1 when there is none
  bool self = true;           // queries and keys are the same positions (self-attention)
  bool causal = false;        // query i sees keys 0..i only (the decoder's self-attention)
  std::vector<int64_t> rank;  // each key's frequency rank in the training data (0 = most
                              // frequent); empty: no rare-token statistics
  int64_t exclude_top = 500;  // Voita: keys among the most frequent N never count as rare
};

// Running sums over the query tokens a head has seen.
struct HeadStats {
  double tokens = 0;
  // Confidence: the max weight over keys other than EOS (BOS in the decoder's self-attention), of
  // the queries that see such a key (not the decoder's first, which sees BOS alone).
  double max_weight_sum = 0, confidence_tokens = 0;
  double entropy_sum = 0;  // nats
  double eos_sum = 0;
  double prev_sum = 0, same_sum = 0, next_sum = 0;  // self-attention only
  double self_tokens = 0;
  std::map<int64_t, double> argmax_offsets;  // key - query of the maximum (self-attention)
  double rare_hits = 0, rare_tokens = 0;

  void add(const torch::Tensor& w, const SentenceKeys& keys);

  double confidence() const {
    return confidence_tokens > 0 ? max_weight_sum / confidence_tokens : 0;
  }
  double entropy() const { return tokens > 0 ? entropy_sum / tokens : 0; }
  double attention_to_eos() const { return tokens > 0 ? eos_sum / tokens : 0; }
  double attention_prev() const { return self_tokens > 0 ? prev_sum / self_tokens : 0; }
  double attention_same() const { return self_tokens > 0 ? same_sum / self_tokens : 0; }
  double attention_next() const { return self_tokens > 0 ? next_sum / self_tokens : 0; }
  // The most frequent relative offset of the maximum and the share of tokens it covers.
  std::pair<int64_t, double> top_offset() const;
  // Positional head: at least `threshold` of the maxima at one relative offset.
  bool positional(double threshold = 0.9) const { return top_offset().second >= threshold; }
  // Share of (eligible) tokens whose maximum goes to the sentence's rarest key: the queries of
  // sentences whose rarest key is rare enough, and that see it (causal: at or after it).
  double rare_fraction() const { return rare_tokens > 0 ? rare_hits / rare_tokens : 0; }
};

// The functions a head is given (Voita et al. 2019): positional (a self-attention head with at
// least 90% of its maxima at one relative offset, 0 included), rare-token (at least half of its
// maxima on the sentence's rarest key), syntactic (decided from dependency parses, when there are
// any).
struct HeadFunctions {
  bool positional = false, rare_token = false, syntactic = false;
  std::string label() const;  // "positional+rare-token", or "none"
};
HeadFunctions head_functions(const HeadStats& s, bool self_attention, bool syntactic = false);

// Jensen-Shannon divergence (nats) between the rows of p and q, summed over rows. p, q [T, S].
double js_divergence(const torch::Tensor& p, const torch::Tensor& q);

// Pairwise summed JS divergences of N heads over one sentence: heads [N, T, S] -> [N, N].
torch::Tensor pairwise_js(const torch::Tensor& heads);

// Classical multidimensional scaling of a symmetric distance matrix D [n, n] to `dims`
// coordinates: eigenvectors of B = -1/2 J D^2 J with the largest eigenvalues, scaled by their
// square roots. Returns [n, dims] (double).
torch::Tensor classical_mds(const torch::Tensor& distances, int64_t dims = 2);

// Spearman's rank correlation of x and y (ties get their mean rank; 0 when either is constant).
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace headcount::analysis
