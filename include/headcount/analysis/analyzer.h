// `headcount analyze`: which heads of a checkpoint (full or pruned) matter and what they do, over
// a dataset (a split of the checkpoint's corpus): Michel et al.'s gradient importance and its
// pruning curve, single-head ablations, per-head attention statistics, and head similarity.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "headcount/analysis/alignment.h"
#include "headcount/analysis/head_stats.h"
#include "headcount/analysis/syntax.h"
#include "headcount/model/architecture.h"

namespace headcount::analysis {

namespace fs = std::filesystem;

using HeadId = model::HeadId;

// Syntactic statistics of the encoder self-attention heads (the parses are of the source side).
struct SyntaxResult {
  std::vector<HeadId> heads;  // the enc_self heads, in the order of Analyzer::heads()
  std::vector<SyntaxStats> stats;
  OffsetBaseline baseline;
  int64_t sentences = 0;  // sentences whose pieces matched their parse's words
  int64_t unmatched = 0;  // sentences skipped: their pieces do not spell the parse's words
};

// The encoder-decoder heads as aligners (alignment.h).
struct AlignmentResult {
  std::vector<HeadId> heads;                // the encoder-decoder heads, in the order of heads()
  std::vector<AlignCounts> predict, input;  // per head, by query convention
  // Per decoder layer: the argmax of its heads' mean attention (zero counts: no heads).
  std::vector<AlignCounts> layer_predict, layer_input;
  AlignBaseline baseline;
  int64_t sentences = 0;  // scored
  int64_t unmatched = 0;  // skipped: pieces do not spell the words of the text
  int64_t target_words = 0, linked_words = 0;
};

// A prune run's removal order (RUN/head_removal.csv) against an analysis's heads.
struct RemovalOrder {
  std::vector<size_t> gated;  // indices into the heads given, in the file's order
  std::vector<double> step;   // removal step of each gated head; kept heads: last + 1
  std::vector<HeadId> removed;
  double last = 0;  // the last removal step
  bool kept(size_t k) const { return step[k] > last; }
};
// Every head in the file must be one of `heads` (the checkpoint the run started from, named in
// the error as `checkpoint`).
RemovalOrder read_removal_order(const fs::path& run, const std::vector<HeadId>& heads,
                                const std::string& checkpoint);

// Head relevance by layer-wise relevance propagation (relevance.h), over the dataset.
struct RelevanceResult {
  // Per head (order of heads()): `share`, its share of its layer's head relevance summed over all
  // target tokens (Voita et al.'s per-layer normalisation); `token_share`, its share per token
  // averaged over tokens (unstable where a layer's heads carry almost none of a token's
  // relevance, as in upper encoder layers, where most of it flows through the residual stream);
  // `raw`, its relevance per token.
  std::vector<double> share, token_share, raw;
  double source_share = 0;    // share of the relevance reaching the embeddings that is the source's
  double reached_inputs = 0;  // share of the top-1 logit that reaches the embeddings (the rest
                              // is absorbed by biases and the stabiliser)
  int64_t sentences = 0, tokens = 0;
};

struct AnalyzeOptions {
  fs::path checkpoint;
  std::string split = "dev";  // dev | test
  int sentences = 500;        // the first N of the split (0: all)
  int beam = 1;               // decoding for BLEU (1: greedy)
  int batch_sentences = 32;   // teacher-forced passes
  int64_t exclude_top = 500;  // rare-token heads: keys among the N most frequent never count
  // "KEY=VALUE" overrides of the checkpoint's config (threads.*, decode.*, device), as eval's
  // --set: e.g. threads.intra_op=1 beside a training run, decode.precision=fp32.
  std::vector<std::string> sets;
};

// Where Analyzer::importance takes the absolute value of dL/dxi_h.
enum class ImportanceUnit {
  kToken,     // per query token, divided by the tokens: METHODS.md's I_h (the default)
  kSentence,  // per sentence (one multiplier per head and sentence), divided by the sentences:
              // Michel et al.'s E_x |dL(x)/dxi_h| with x a sentence
  kSplit,     // none: -(sum of dL/dxi_h over the split) / sentences, signed (positive where
              // opening the head lowers the loss to first order), the data term an L0 gate's
              // gradient follows at gate 1
};

// "token", "sentence", "split"; an unknown name is an error naming the choices.
ImportanceUnit importance_unit_from(const std::string& name);
const char* importance_unit_name(ImportanceUnit unit);

class Analyzer {
 public:
  explicit Analyzer(const AnalyzeOptions& options);
  ~Analyzer();

  // Every head of the model, by type, layer, head.
  const std::vector<HeadId>& heads() const;
  const model::Architecture& architecture() const;

  // Michel et al.'s I_h = E |A_h^T dL/dA_h| per head (order of heads()): by default the absolute
  // value per token, summed over non-pad query tokens, divided by their number (`unit` moves the
  // absolute value to each sentence or to the whole split). L is each sentence's summed NLL.
  // `normalize_layers` divides each layer's scores by their L2 norm.
  std::vector<double> importance(bool normalize_layers,
                                 ImportanceUnit unit = ImportanceUnit::kToken);

  // Corpus BLEU (decoding with the options' beam) with the given heads masked (gate 0).
  double bleu(const std::vector<HeadId>& masked);

  // Attention statistics of every head (order of heads()).
  std::vector<HeadStats> head_stats();

  // Syntactic accuracy of every encoder self-attention head against `parses`, the dependency
  // parses of the dataset's source sentences in order (sentence i of the file is sentence i of
  // the split; extra parses are ignored, missing ones are an error).
  SyntaxResult syntax(const std::vector<DepSentence>& parses);

  // LRP head relevance to the top-1 logit of every target token, teacher-forced on the
  // reference (epsilon rule with stabiliser `eps`).
  RelevanceResult relevance(double eps);

  // Force-decodes `targets` (sentence i against the split's source sentence i; at least as many
  // as the analysis uses) and scores each encoder-decoder head, and each layer's mean, as an
  // aligner against `links` (word indices of the source line and of the target line, split at
  // spaces).
  AlignmentResult alignment(const std::vector<std::string>& targets,
                            const std::vector<std::vector<data::WordLink>>& links);

  // Summed JS divergences between the heads of one attention type (rows and columns in the order
  // of heads() restricted to that type), over the dataset.
  torch::Tensor js_distances(model::AttentionType type);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace headcount::analysis
