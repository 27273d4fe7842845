#include "headcount/eval/chrf.h"

#include <unordered_map>

#include "headcount/common/check.h"
#include "headcount/common/text.h"
#include "headcount/eval/bleu.h"
#include "references.h"

namespace headcount::eval {
namespace {

using Counts = std::unordered_map<std::u32string, int>;

bool is_ascii_punct(char32_t c) {
  return c < 0x80 && ((c >= U'!' && c <= U'/') || (c >= U':' && c <= U'@') ||
                      (c >= U'[' && c <= U'`') || (c >= U'{' && c <= U'~'));
}

// chrF++'s primitive word split: a word of two or more characters loses one ASCII punctuation
// mark at its end or (failing that) at its start, which becomes a word of its own.
std::vector<std::u32string> split_words(const std::u32string& s) {
  std::vector<std::u32string> out;
  for (auto& w : text::split_py(s)) {
    if (w.size() == 1) {
      out.push_back(std::move(w));
    } else if (is_ascii_punct(w.back())) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (is_ascii_punct(w.front())) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(std::move(w));
    }
  }
  return out;
}

Counts char_ngrams(const std::u32string& s, int n) {
  Counts c;
  for (size_t i = 0; i + n <= s.size(); ++i) ++c[s.substr(i, n)];
  return c;
}

Counts word_ngrams(const std::vector<std::u32string>& words, int n) {
  Counts c;
  for (size_t i = 0; i + n <= words.size(); ++i) {
    std::u32string key = words[i];
    for (int k = 1; k < n; ++k) {
      key.push_back(U' ');
      key += words[i + k];
    }
    ++c[key];
  }
  return c;
}

// All n-gram tables of a segment: character orders 1..char_order, then word orders.
std::vector<Counts> all_ngrams(const std::u32string& s, const ChrfOptions& o) {
  std::vector<Counts> out;
  std::u32string chars;
  if (o.whitespace) {
    chars = s;
  } else {
    for (char32_t c : s) {
      if (!text::is_py_space(c)) chars.push_back(c);
    }
  }
  for (int n = 1; n <= o.char_order; ++n) out.push_back(char_ngrams(chars, n));
  if (o.word_order > 0) {
    const auto words = split_words(s);
    for (int n = 1; n <= o.word_order; ++n) out.push_back(word_ngrams(words, n));
  }
  return out;
}

}  // namespace

Chrf::Chrf(ChrfOptions options) : options_(options) {
  HC_CHECK(options_.char_order >= 1 && options_.char_order <= 20,
           "chrF character order must be between 1 and 20, got {}", options_.char_order);
  HC_CHECK(options_.word_order >= 0 && options_.word_order <= 10,
           "chrF word order must be between 0 and 10, got {}", options_.word_order);
  HC_CHECK(options_.beta >= 1, "chrF beta must be a positive integer, got {}", options_.beta);
}

std::u32string Chrf::preprocess(const std::string& s) const {
  std::u32string line = text::to_u32(s);
  return options_.lowercase ? text::lower(line) : line;
}

double Chrf::f_score(const std::vector<double>& st) const {
  const double eps = 1e-16;
  const double factor = static_cast<double>(options_.beta) * options_.beta;
  const int order = options_.char_order + options_.word_order;
  double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int i = 0; i < order; ++i) {
    const double n_hyp = st[3 * i], n_ref = st[3 * i + 1], n_match = st[3 * i + 2];
    const double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    const double rec = n_ref > 0 ? n_match / n_ref : eps;
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (options_.eps_smoothing) return 100 * score / order;
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec != 0.0) {
    score = (1 + factor) * avg_prec * avg_rec;
    score /= (factor * avg_prec) + avg_rec;
    return 100 * score;
  }
  return 0.0;
}

std::vector<double> Chrf::segment_stats(const std::u32string& hyp,
                                        const std::vector<std::u32string>& refs) const {
  const auto hyp_ngrams = all_ngrams(hyp, options_);
  std::vector<double> best;
  double best_f = -1.0;
  for (const auto& ref : refs) {
    const auto ref_ngrams = all_ngrams(ref, options_);
    std::vector<double> stats;
    for (size_t k = 0; k < hyp_ngrams.size(); ++k) {
      double hyp_count = 0, ref_count = 0, match = 0;
      for (const auto& [ng, c] : hyp_ngrams[k]) {
        hyp_count += c;
        const auto it = ref_ngrams[k].find(ng);
        if (it != ref_ngrams[k].end()) match += std::min(c, it->second);
      }
      for (const auto& [ng, c] : ref_ngrams[k]) ref_count += c;
      // Hypothesis n-grams do not count when the reference has none of that order.
      stats.push_back(ref_ngrams[k].empty() ? 0.0 : hyp_count);
      stats.push_back(ref_count);
      stats.push_back(match);
    }
    const double f = f_score(stats);
    if (f > best_f) {
      best_f = f;
      best = std::move(stats);
    }
  }
  return best;
}

std::vector<std::vector<double>> Chrf::sentence_stats(
    const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs) const {
  const auto per_sentence = detail::gather_references(hyps.size(), refs, &last_nrefs_);
  std::vector<std::vector<double>> out;
  out.reserve(hyps.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    std::vector<std::u32string> r;
    for (const std::string* ref : per_sentence[i]) r.push_back(preprocess(*ref));
    out.push_back(segment_stats(preprocess(hyps[i]), r));
  }
  return out;
}

ChrfScore Chrf::corpus_score(const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& refs) const {
  const int order = options_.char_order + options_.word_order;
  std::vector<double> sum(3 * order, 0.0);
  for (const auto& st : sentence_stats(hyps, refs))
    for (size_t k = 0; k < st.size(); ++k) sum[k] += st[k];
  ChrfScore s;
  s.score = f_score(sum);
  for (int i = 0; i < order; ++i) s.stats.push_back({sum[3 * i], sum[3 * i + 1], sum[3 * i + 2]});
  return s;
}

ChrfScore Chrf::sentence_score(const std::string& hyp, const std::vector<std::string>& refs) const {
  std::vector<std::vector<std::string>> streams;
  for (const auto& r : refs) streams.push_back({r});
  return corpus_score({hyp}, streams);
}

std::string Chrf::name() const {
  return fmt::format("chrF{}{}", options_.beta, std::string(options_.word_order, '+'));
}

std::string Chrf::signature(int nrefs) const {
  return fmt::format("nrefs:{}|case:{}|eff:{}|nc:{}|nw:{}|space:{}|version:{}",
                     nrefs < 0 ? std::string("var") : std::to_string(nrefs),
                     options_.lowercase ? "lc" : "mixed", options_.eps_smoothing ? "no" : "yes",
                     options_.char_order, options_.word_order, options_.whitespace ? "yes" : "no",
                     kSacrebleuVersion);
}

}  // namespace headcount::eval
