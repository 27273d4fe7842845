#include "headcount/eval/bleu.h"

#include <cmath>
#include <unordered_map>

#include "headcount/common/check.h"
#include "headcount/common/text.h"
#include "headcount/eval/tokenizers.h"
#include "references.h"

namespace headcount::eval {
namespace {

using NgramCounts = std::unordered_map<std::u32string, int>;

// All n-grams of orders 1..max_order of a whitespace-tokenised line, keyed by their text.
NgramCounts extract_ngrams(const std::vector<std::u32string>& tokens, int max_order) {
  NgramCounts counts;
  for (int n = 1; n <= max_order; ++n) {
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      std::u32string key = tokens[i];
      for (int k = 1; k < n; ++k) {
        key.push_back(U' ');
        key += tokens[i + k];
      }
      ++counts[key];
    }
  }
  return counts;
}

int ngram_order(const std::u32string& key) {
  int n = 1;
  for (char32_t c : key) n += c == U' ';
  return n;
}

// sacreBLEU's closest reference length: the smallest absolute difference, ties to the shorter.
size_t closest_ref_len(size_t hyp_len, const std::vector<size_t>& ref_lens) {
  long best_diff = -1;
  size_t best_len = 0;
  for (size_t len : ref_lens) {
    const long diff = std::labs(static_cast<long>(hyp_len) - static_cast<long>(len));
    if (best_diff == -1 || diff < best_diff) {
      best_diff = diff;
      best_len = len;
    } else if (diff == best_diff) {
      best_len = std::min(best_len, len);
    }
  }
  return best_len;
}

double smooth_default(const std::string& method) {
  if (method == "floor") return 0.1;
  if (method == "add-k") return 1.0;
  return 0.0;
}

double my_log(double x) {
  return x == 0.0 ? -9999999999.0 : std::log(x);
}

}  // namespace

void BleuStats::add(const BleuStats& other) {
  sys_len += other.sys_len;
  ref_len += other.ref_len;
  if (correct.size() < other.correct.size()) correct.resize(other.correct.size(), 0.0);
  if (total.size() < other.total.size()) total.resize(other.total.size(), 0.0);
  for (size_t i = 0; i < other.correct.size(); ++i) correct[i] += other.correct[i];
  for (size_t i = 0; i < other.total.size(); ++i) total[i] += other.total[i];
}

std::string BleuScore::verbose(int width) const {
  std::string prec;
  for (size_t i = 0; i < precisions.size(); ++i) {
    if (i) prec += '/';
    prec += fmt::format("{:.1f}", precisions[i]);
  }
  return fmt::format("{} (BP = {:.3f} ratio = {:.3f} hyp_len = {:d} ref_len = {:d})", prec, bp,
                     ratio, static_cast<long long>(sys_len), static_cast<long long>(ref_len));
}

Bleu::Bleu(BleuOptions options) : options_(std::move(options)) {
  check_tokenizer_name(options_.tokenize);
  const auto& m = options_.smooth_method;
  HC_CHECK(m == "exp" || m == "floor" || m == "add-k" || m == "none",
           "unknown BLEU smoothing '{}': expected one of exp, floor, add-k, none", m);
  HC_CHECK(options_.max_ngram_order >= 1 && options_.max_ngram_order <= 20,
           "BLEU max n-gram order must be between 1 and 20, got {}", options_.max_ngram_order);
}

std::u32string Bleu::preprocess(const std::string& s) const {
  std::u32string line = text::to_u32(s);
  if (options_.lowercase) line = text::lower(line);
  return tokenize(options_.tokenize, text::rstrip_py(line));
}

std::vector<BleuStats> Bleu::sentence_stats(
    const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs) const {
  const int max_order = options_.max_ngram_order;
  const auto per_sentence = detail::gather_references(hyps.size(), refs, &last_nrefs_);
  std::vector<BleuStats> out(hyps.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    // References: n-gram counts merged by maximum, and their lengths.
    NgramCounts ref_ngrams;
    std::vector<size_t> ref_lens;
    for (const std::string* ref : per_sentence[i]) {
      const auto tokens = text::split_py(preprocess(*ref));
      ref_lens.push_back(tokens.size());
      for (auto& [ngram, count] : extract_ngrams(tokens, max_order)) {
        int& slot = ref_ngrams[ngram];
        slot = std::max(slot, count);
      }
    }
    const auto tokens = text::split_py(preprocess(hyps[i]));
    BleuStats& st = out[i];
    st.sys_len = static_cast<double>(tokens.size());
    st.ref_len = static_cast<double>(closest_ref_len(tokens.size(), ref_lens));
    st.correct.assign(max_order, 0.0);
    st.total.assign(max_order, 0.0);
    for (const auto& [ngram, count] : extract_ngrams(tokens, max_order)) {
      const int n = ngram_order(ngram) - 1;
      st.total[n] += count;
      const auto it = ref_ngrams.find(ngram);
      if (it != ref_ngrams.end()) st.correct[n] += std::min(count, it->second);
    }
  }
  return out;
}

BleuScore Bleu::compute(BleuStats stats, const BleuOptions& options) {
  const int max_order = options.max_ngram_order;
  stats.correct.resize(max_order, 0.0);
  stats.total.resize(max_order, 0.0);
  const double smooth_value =
      options.smooth_value ? *options.smooth_value : smooth_default(options.smooth_method);
  BleuScore s;
  s.sys_len = stats.sys_len;
  s.ref_len = stats.ref_len;
  s.ratio = stats.ref_len > 0 ? stats.sys_len / stats.ref_len : 0.0;
  if (stats.sys_len < stats.ref_len) {
    s.bp = stats.sys_len > 0 ? std::exp(1.0 - stats.ref_len / stats.sys_len) : 0.0;
  } else {
    s.bp = 1.0;
  }
  s.precisions.assign(max_order, 0.0);
  bool any_match = false;
  for (double c : stats.correct) any_match = any_match || c != 0.0;
  if (!any_match) {
    s.counts = stats.correct;
    s.totals = stats.total;
    s.score = 0.0;
    return s;
  }
  double smooth_mteval = 1.0;
  int eff_order = max_order;
  auto& correct = stats.correct;
  auto& total = stats.total;
  for (int n = 1; n <= max_order; ++n) {
    if (options.smooth_method == "add-k" && n > 1) {
      correct[n - 1] += smooth_value;
      total[n - 1] += smooth_value;
    }
    if (total[n - 1] == 0) break;
    if (options.effective_order) eff_order = n;
    if (correct[n - 1] == 0) {
      if (options.smooth_method == "exp") {
        smooth_mteval *= 2;
        s.precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1]);
      } else if (options.smooth_method == "floor") {
        s.precisions[n - 1] = 100.0 * smooth_value / total[n - 1];
      }
    } else {
      s.precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1];
    }
  }
  double log_sum = 0.0;
  for (int i = 0; i < eff_order; ++i) log_sum += my_log(s.precisions[i]);
  s.score = s.bp * std::exp(log_sum / eff_order);
  s.counts = correct;
  s.totals = total;
  return s;
}

BleuScore Bleu::score_from_stats(const BleuStats& stats) const {
  return compute(stats, options_);
}

BleuScore Bleu::corpus_score(const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& refs) const {
  BleuStats sum;
  sum.correct.assign(options_.max_ngram_order, 0.0);
  sum.total.assign(options_.max_ngram_order, 0.0);
  for (const auto& st : sentence_stats(hyps, refs)) sum.add(st);
  return compute(sum, options_);
}

BleuScore Bleu::sentence_score(const std::string& hyp, const std::vector<std::string>& refs) const {
  std::vector<std::vector<std::string>> streams;
  for (const auto& r : refs) streams.push_back({r});
  return corpus_score({hyp}, streams);
}

std::string Bleu::signature(int nrefs) const {
  std::string smooth = options_.smooth_method;
  if (smooth == "floor" || smooth == "add-k") {
    const double v =
        options_.smooth_value ? *options_.smooth_value : smooth_default(options_.smooth_method);
    smooth += fmt::format("[{:.2f}]", v);
  }
  return fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:{}",
                     nrefs < 0 ? std::string("var") : std::to_string(nrefs),
                     options_.lowercase ? "lc" : "mixed", options_.effective_order ? "yes" : "no",
                     options_.tokenize, smooth, kSacrebleuVersion);
}

}  // namespace headcount::eval
