// Corpus and sentence BLEU with sacreBLEU 2.x semantics (tokenizers, smoothing, effective order,
// closest reference length, multiple and variable references, signature).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace headcount::eval {

struct BleuOptions {
  std::string tokenize = "13a";  // 13a | intl | none | char
  bool lowercase = false;
  std::string smooth_method = "exp";   // exp | floor | add-k | none
  std::optional<double> smooth_value;  // floor: default 0.1, add-k: default 1
  bool effective_order = false;        // on for sentence-level BLEU, as sacreBLEU
  int max_ngram_order = 4;
};

// Sufficient statistics; they add up over sentences. Counts are doubles because add-k smoothing
// adds k to them, exactly as sacreBLEU reports.
struct BleuStats {
  double sys_len = 0;
  double ref_len = 0;
  std::vector<double> correct;  // matching n-grams, n = 1..max order
  std::vector<double> total;    // hypothesis n-grams
  void add(const BleuStats& other);
};

struct BleuScore {
  double score = 0;
  std::vector<double> counts;
  std::vector<double> totals;
  std::vector<double> precisions;
  double bp = 0;
  double ratio = 0;
  double sys_len = 0;
  double ref_len = 0;
  // "82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)"
  std::string verbose(int width = 2) const;
};

class Bleu {
 public:
  explicit Bleu(BleuOptions options = {});

  // refs[k][i] is reference k of sentence i (sacreBLEU's reference streams). Empty reference
  // strings are skipped; a sentence must keep at least one.
  BleuScore corpus_score(const std::vector<std::string>& hyps,
                         const std::vector<std::vector<std::string>>& refs) const;
  BleuScore sentence_score(const std::string& hyp, const std::vector<std::string>& refs) const;
  // Per-sentence statistics (what corpus_score sums).
  std::vector<BleuStats> sentence_stats(const std::vector<std::string>& hyps,
                                        const std::vector<std::vector<std::string>>& refs) const;
  BleuScore score_from_stats(const BleuStats& stats) const;

  // "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0". `nrefs` < 0 means variable.
  std::string signature(int nrefs) const;
  // The number of references seen by the last corpus_score / sentence_stats (-1: variable).
  int last_nrefs() const { return last_nrefs_; }
  const BleuOptions& options() const { return options_; }

  static BleuScore compute(BleuStats stats, const BleuOptions& options);

 private:
  std::u32string preprocess(const std::string& s) const;
  BleuOptions options_;
  mutable int last_nrefs_ = 0;
};

// The sacreBLEU version whose semantics these metrics reproduce; it appears in signatures so
// that they compare equal with sacreBLEU's.
inline constexpr const char* kSacrebleuVersion = "2.6.0";

}  // namespace headcount::eval
