// `headcount analyze`: which heads of a checkpoint (full or pruned) matter and what they do, over
// a dataset (a split of the checkpoint's corpus): Michel et al.'s gradient importance and its
// pruning curve, single-head ablations, per-head attention statistics, and head similarity.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "headcount/analysis/head_stats.h"
#include "headcount/model/architecture.h"

namespace headcount::analysis {

namespace fs = std::filesystem;

struct HeadId {
  model::AttentionType type;
  int64_t layer = 0, head = 0;
  std::string label() const;  // "enc_self L2 H5"
};

struct AnalyzeOptions {
  fs::path checkpoint;
  std::string split = "dev";  // dev | test
  int sentences = 500;        // the first N of the split (0: all)
  int beam = 1;               // decoding for BLEU (1: greedy)
  int batch_sentences = 32;   // teacher-forced passes
  int64_t exclude_top = 500;  // rare-token heads: keys among the N most frequent never count
};

class Analyzer {
 public:
  explicit Analyzer(const AnalyzeOptions& options);
  ~Analyzer();

  // Every head of the model, by type, layer, head.
  const std::vector<HeadId>& heads() const;
  const model::Architecture& architecture() const;

  // Michel et al.'s I_h = E |A_h^T dL/dA_h| per head (order of heads()): the absolute value per
  // token, summed over non-pad query tokens, divided by their number. `normalize_layers` divides
  // each layer's scores by their L2 norm.
  std::vector<double> importance(bool normalize_layers);

  // Corpus BLEU (decoding with the options' beam) with the given heads masked (gate 0).
  double bleu(const std::vector<HeadId>& masked);

  // Attention statistics of every head (order of heads()).
  std::vector<HeadStats> head_stats();

  // Summed JS divergences between the heads of one attention type (rows and columns in the order
  // of heads() restricted to that type), over the dataset.
  torch::Tensor js_distances(model::AttentionType type);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace headcount::analysis
