// Encoder-decoder attention heads as word aligners, scored against gold word links (METHODS §5;
// the Bible corpus's links come from the modules' Strong's numbers, data/links.h).
//
// A head's alignment of a sentence pair: for each target word, the source word its attention
// falls on most (word-level attention: the mean over the target word's pieces of the sum over
// the source word's pieces; source EOS excluded). Two query conventions are scored: "predict",
// the decoder position whose output is the target piece, and "input", the position that reads it
// (one step later; "shift" in Chen et al. 2020). Only target words with at least one gold link
// are scored, so A (the predicted links) has one link per linked target word, and
//   precision = |A & P| / |A|,  recall = |A & S| / |S|,
//   AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)   (Och & Ney 2003; S sure, P possible, S in P).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <vector>

#include "headcount/data/links.h"

namespace headcount::analysis {

struct AlignCounts {
  double predicted = 0;     // |A|
  double hit_possible = 0;  // |A & P|
  double hit_sure = 0;      // |A & S|
  double sure = 0;          // |S|
  double precision() const { return predicted > 0 ? hit_possible / predicted : 0; }
  double recall() const { return sure > 0 ? hit_sure / sure : 0; }
  double aer() const {
    return predicted + sure > 0 ? 1 - (hit_sure + hit_possible) / (predicted + sure) : 1;
  }
  void operator+=(const AlignCounts& o);
};

// Gold links of one sentence pair, by target word.
struct GoldAlignment {
  std::vector<std::vector<int32_t>> possible, sure;  // [target word] -> source words (S in P)
  int64_t sure_links = 0;
  GoldAlignment(const std::vector<data::WordLink>& links, int64_t n_tgt_words);
  bool linked(int64_t t) const { return !possible[t].empty(); }
};

// Scores one sentence's predictions: predicted[t] is the source word aligned to target word t
// (-1: none). Every gold sure link counts in |S|, predicted or not.
AlignCounts score_alignment(const std::vector<int64_t>& predicted, const GoldAlignment& gold);

// Fixed-offset baselines: target word t aligned to source word t + k (clipped to the sentence),
// for k in [-max_offset, max_offset], and the diagonal round(t * n_src / n_tgt).
struct AlignBaseline {
  int64_t max_offset = 5;
  std::map<int64_t, AlignCounts> offset;
  AlignCounts diagonal;
  void add(const GoldAlignment& gold, int64_t n_src_words);
  // The best of all (by precision): its name ("offset +1", "diagonal") and counts.
  std::pair<std::string, AlignCounts> best() const;
};

// Word-level attention [n_tgt, n_src] from piece-level rows w [Q, K] (Q query rows, one per
// target piece in order; K key positions): rows averaged over each target word's pieces, columns
// summed over each source word's pieces. Pieces mapped to -1 (EOS, unmatched) are dropped.
// w may carry leading dimensions ([..., Q, K]); so does the result.
torch::Tensor cross_word_attention(const torch::Tensor& w, const std::vector<int64_t>& tgt_word,
                                   int64_t n_tgt, const std::vector<int64_t>& src_word,
                                   int64_t n_src);

// For each target word, the source word with the largest weight ([..., n_tgt] int64; -1 for a
// target word without pieces or a row of zeros).
torch::Tensor align_argmax(const torch::Tensor& word_w);

}  // namespace headcount::analysis
