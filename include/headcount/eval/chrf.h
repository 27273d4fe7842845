// chrF and chrF++ with sacreBLEU 2.x semantics (character n-grams over code points, optional word
// n-grams, best reference by F-score, eps smoothing or the effective-order average).
#pragma once

#include <string>
#include <vector>

namespace headcount::eval {

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;  // 2 gives chrF++
  int beta = 2;
  bool lowercase = false;
  bool whitespace = false;  // keep whitespace inside character n-grams
  bool eps_smoothing = false;
};

struct ChrfScore {
  double score = 0;
  // Per order (characters first, then words): hypothesis n-grams, reference n-grams, matches.
  std::vector<std::vector<double>> stats;
};

class Chrf {
 public:
  explicit Chrf(ChrfOptions options = {});

  ChrfScore corpus_score(const std::vector<std::string>& hyps,
                         const std::vector<std::vector<std::string>>& refs) const;
  ChrfScore sentence_score(const std::string& hyp, const std::vector<std::string>& refs) const;
  // Per-segment statistics, flat: 3 per order (hypothesis, reference and matching n-grams of
  // the segment's best reference), characters first; what corpus_score sums and f_score scores.
  std::vector<std::vector<double>> sentence_stats(
      const std::vector<std::string>& hyps,
      const std::vector<std::vector<std::string>>& refs) const;

  // "chrF2", "chrF2++"
  std::string name() const;
  // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
  std::string signature(int nrefs) const;
  int last_nrefs() const { return last_nrefs_; }
  double f_score(const std::vector<double>& flat_stats) const;

 private:
  struct RefInfo;
  std::vector<double> segment_stats(const std::u32string& hyp,
                                    const std::vector<std::u32string>& refs) const;
  std::u32string preprocess(const std::string& s) const;
  ChrfOptions options_;
  mutable int last_nrefs_ = 0;
};

}  // namespace headcount::eval
