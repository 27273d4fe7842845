// Syntactic heads (METHODS §5; Voita et al. 2019 §5.3, Clark et al. 2019 §4): how often a head's
// most-attended word is the dependency head (or the dependent) of a relation, against the best
// fixed-offset baseline, from dependency parses of the source side given as CoNLL-U.
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace headcount::analysis {

namespace fs = std::filesystem;

struct DepWord {
  std::string form;
  int64_t head = 0;      // 1-based index of the head word; 0: the root
  std::string relation;  // universal relation without its subtype ("nsubj:pass" -> "nsubj")
};

struct DepSentence {
  std::vector<DepWord> words;
  size_t line = 0;  // line of the sentence's first word in its file
};

// Reads a CoNLL-U file: one sentence per blank-line-separated block; comments, multiword token
// ranges (1-2) and empty nodes (1.1) skipped. Malformed lines are errors naming file and line.
std::vector<DepSentence> read_conllu(const fs::path& path);

// Which word each subword piece belongs to, by aligning characters: the pieces (SentencePiece's
// word-start mark U+2581 removed) and the words, concatenated without spaces, must spell the same
// string. A piece belongs to the word its first character is in. nullopt when they do not match.
std::optional<std::vector<int64_t>> map_pieces_to_words(const std::vector<std::string>& pieces,
                                                        const std::vector<std::string>& words);

// Word-level attention from piece-level self-attention w [P, P] (P may include extra positions,
// e.g. EOS, mapped to -1, which are dropped): attention to a split word is the sum over its pieces,
// attention from a split word the mean over its pieces. Words without a piece get rows and columns
// of zeros. Returns [n_words, n_words] (double).
torch::Tensor word_attention(const torch::Tensor& w, const std::vector<int64_t>& piece_word,
                             int64_t n_words);

enum class DepDirection { kDependentToHead = 0, kHeadToDependent = 1 };
const char* direction_name(DepDirection d);  // "dep->head" / "head->dep"

struct RelationCount {
  double hits = 0, total = 0;
  double accuracy() const { return total > 0 ? hits / total : 0; }
};

// One head's accuracy per relation and direction. For an arc (dependent d, head h), direction
// dependent->head is a hit when the word d attends to most (itself excluded) is h; head->dependent
// when h's most-attended word is d. Words without pieces are skipped.
struct SyntaxStats {
  std::map<std::string, std::array<RelationCount, 2>> relations;
  // word_w [n, n]: word-level attention of one head over `sentence` (word_attention()).
  void add(const torch::Tensor& word_w, const DepSentence& sentence,
           const std::vector<bool>& has_piece = {});
};

// The fixed-offset baseline: for each relation and direction, the accuracy of predicting the
// other end of every arc as the word at a fixed relative offset, for each offset in
// [-max_offset, max_offset] without 0; best() gives the best offset and its accuracy.
struct OffsetBaseline {
  int64_t max_offset = 10;
  std::map<std::string, std::array<std::map<int64_t, RelationCount>, 2>> counts;
  void add(const DepSentence& sentence, const std::vector<bool>& has_piece = {});
  std::pair<int64_t, double> best(const std::string& relation, DepDirection d) const;
  double arcs(const std::string& relation, DepDirection d) const;
};

// Voita's syntactic head: for some relation of `relations` (with at least `min_arcs` arcs), in
// either direction, an accuracy at least `margin` above the best fixed-offset baseline.
struct SyntacticVerdict {
  bool syntactic = false;
  std::string relation;  // the relation with the largest gain over its baseline
  DepDirection direction = DepDirection::kDependentToHead;
  double accuracy = 0, baseline = 0;
};
SyntacticVerdict syntactic_verdict(const SyntaxStats& head, const OffsetBaseline& baseline,
                                   const std::vector<std::string>& relations, double margin = 0.10,
                                   double min_arcs = 20);

}  // namespace headcount::analysis
