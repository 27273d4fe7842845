// headcount bleu: BLEU and chrF exactly as sacreBLEU 2.x computes them.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"

namespace headcount::cli {
namespace {

struct BleuArgs {
  std::string hyp;
  std::vector<std::string> refs;
  std::string metric = "bleu";
  std::string tokenize = "13a";
  bool lowercase = false;
  std::string smooth = "exp";
  std::optional<double> smooth_value;
  int max_ngram_order = 4;
  bool sentence = false;
  int chrf_char_order = 6;
  int chrf_word_order = 0;
  int chrf_beta = 2;
  bool chrf_whitespace = false;
  bool chrf_eps = false;
  bool json = false;
  bool score_only = false;
  int width = 2;
};

// As sacreBLEU reads its inputs: UTF-8 lines, trailing whitespace stripped. "-" is stdin.
std::vector<std::string> read_segments(const std::string& path) {
  auto lines = io::read_lines_or_stdin(path, {.allow_empty_file = true});
  for (auto& l : lines) l = text::rstrip_py_utf8(l);
  return lines;
}

void add_signature_fields(nlohmann::ordered_json& j, const std::string& signature) {
  size_t start = 0;
  while (start < signature.size()) {
    size_t bar = signature.find('|', start);
    if (bar == std::string::npos) bar = signature.size();
    const std::string part = signature.substr(start, bar - start);
    const size_t colon = part.find(':');
    if (colon != std::string::npos) j[part.substr(0, colon)] = part.substr(colon + 1);
    start = bar + 1;
  }
}

nlohmann::ordered_json numbers(const std::vector<double>& v) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (double x : v) {
    if (x == static_cast<double>(static_cast<long long>(x))) {
      out.push_back(static_cast<long long>(x));
    } else {
      out.push_back(x);
    }
  }
  return out;
}

std::string format_bleu(const eval::BleuScore& s, const std::string& signature, const BleuArgs& a) {
  const std::string score = fmt::format("{:.{}f}", s.score, a.width);
  if (a.json) {
    nlohmann::ordered_json j;
    j["name"] = "BLEU";
    j["score"] = s.score;
    j["signature"] = signature;
    j["verbose_score"] = s.verbose(a.width);
    j["counts"] = numbers(s.counts);
    j["totals"] = numbers(s.totals);
    j["precisions"] = s.precisions;
    j["bp"] = s.bp;
    j["ratio"] = s.ratio;
    j["sys_len"] = static_cast<long long>(s.sys_len);
    j["ref_len"] = static_cast<long long>(s.ref_len);
    add_signature_fields(j, signature);
    return j.dump(a.sentence ? -1 : 1);
  }
  if (a.score_only) return score;
  return fmt::format("BLEU|{} = {} {}", signature, score, s.verbose(a.width));
}

std::string format_chrf(const eval::ChrfScore& s, const eval::Chrf& chrf,
                        const std::string& signature, const BleuArgs& a) {
  const std::string score = fmt::format("{:.{}f}", s.score, a.width);
  if (a.json) {
    nlohmann::ordered_json j;
    j["name"] = chrf.name();
    j["score"] = s.score;
    j["signature"] = signature;
    nlohmann::ordered_json stats = nlohmann::ordered_json::array();
    for (const auto& st : s.stats) stats.push_back(numbers(st));
    j["stats"] = stats;
    add_signature_fields(j, signature);
    return j.dump(a.sentence ? -1 : 1);
  }
  if (a.score_only) return score;
  return fmt::format("{}|{} = {}", chrf.name(), signature, score);
}

void run(const BleuArgs& a) {
  const auto hyps = read_segments(a.hyp);
  std::vector<std::vector<std::string>> refs;
  for (const auto& r : a.refs) {
    refs.push_back(read_segments(r));
    HC_CHECK(refs.back().size() == hyps.size(),
             "{} has {} lines but the hypothesis {} has {}: they must be line-aligned", r,
             refs.back().size(), a.hyp == "-" ? "<stdin>" : a.hyp, hyps.size());
  }
  HC_CHECK(!hyps.empty(), "{}: no hypothesis lines", a.hyp == "-" ? "<stdin>" : a.hyp);

  if (a.metric == "bleu") {
    eval::BleuOptions o;
    o.tokenize = a.tokenize;
    o.lowercase = a.lowercase;
    o.smooth_method = a.smooth;
    o.smooth_value = a.smooth_value;
    o.max_ngram_order = a.max_ngram_order;
    o.effective_order = a.sentence;  // sacreBLEU's sentence-level BLEU uses the effective order
    const eval::Bleu bleu(o);
    if (a.sentence) {
      const auto stats = bleu.sentence_stats(hyps, refs);
      for (const auto& st : stats) {
        // Each sentence's own reference count, as sacreBLEU's sentence_score sees it.
        std::puts(
            format_bleu(bleu.score_from_stats(st), bleu.signature(bleu.last_nrefs()), a).c_str());
      }
    } else {
      const auto s = bleu.corpus_score(hyps, refs);
      std::puts(format_bleu(s, bleu.signature(bleu.last_nrefs()), a).c_str());
    }
  } else {
    eval::ChrfOptions o;
    o.char_order = a.chrf_char_order;
    o.word_order = a.chrf_word_order;
    o.beta = a.chrf_beta;
    o.lowercase = a.lowercase;
    o.whitespace = a.chrf_whitespace;
    o.eps_smoothing = a.chrf_eps;
    const eval::Chrf chrf(o);
    if (a.sentence) {
      for (size_t i = 0; i < hyps.size(); ++i) {
        std::vector<std::string> r;
        for (const auto& stream : refs) r.push_back(stream[i]);
        const auto s = chrf.sentence_score(hyps[i], r);
        std::puts(format_chrf(s, chrf, chrf.signature(chrf.last_nrefs()), a).c_str());
      }
    } else {
      const auto s = chrf.corpus_score(hyps, refs);
      std::puts(format_chrf(s, chrf, chrf.signature(chrf.last_nrefs()), a).c_str());
    }
  }
}

}  // namespace

void add_bleu_command(CLI::App& app) {
  auto a = std::make_shared<BleuArgs>();
  auto* cmd = app.add_subcommand(
      "bleu", "Score a hypothesis file against references with BLEU or chrF, as sacreBLEU 2.x");
  cmd->add_option("hypothesis", a->hyp, "Hypothesis file, one segment a line ('-' for stdin)")
      ->required();
  cmd->add_option("references", a->refs, "Reference file(s), line-aligned with the hypothesis")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-m,--metric", a->metric, "bleu or chrf")
      ->check(CLI::IsMember({"bleu", "chrf"}))
      ->capture_default_str();
  cmd->add_option("--tokenize,--tok", a->tokenize, "BLEU tokenizer: 13a, intl, none, char")
      ->check(CLI::IsMember({"13a", "intl", "none", "char"}))
      ->capture_default_str();
  cmd->add_flag("--lowercase,--lc", a->lowercase, "Lowercase hypothesis and references");
  cmd->add_option("--smooth", a->smooth, "BLEU smoothing: exp, floor, add-k, none")
      ->check(CLI::IsMember({"exp", "floor", "add-k", "none"}))
      ->capture_default_str();
  cmd->add_option("--smooth-value", a->smooth_value,
                  "Value for floor (default 0.1) and add-k (default 1) smoothing");
  cmd->add_option("--max-ngram-order", a->max_ngram_order, "BLEU's largest n-gram order")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  cmd->add_flag("--sentence", a->sentence,
                "One score per line (BLEU with the effective order, as sacreBLEU's "
                "sentence-level mode)");
  cmd->add_option("--chrf-char-order", a->chrf_char_order, "chrF character n-gram order")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  cmd->add_option("--chrf-word-order", a->chrf_word_order, "chrF word n-gram order (2: chrF++)")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();
  cmd->add_option("--chrf-beta", a->chrf_beta, "chrF recall weight")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--chrf-whitespace", a->chrf_whitespace, "Keep whitespace in character n-grams");
  cmd->add_flag("--chrf-eps-smoothing", a->chrf_eps,
                "chrF's eps smoothing (chrF++.py) instead of the effective-order average");
  cmd->add_flag("--json", a->json, "Print a JSON object (one per line with --sentence)");
  cmd->add_flag("-b,--score-only", a->score_only, "Print the score alone");
  cmd->add_option("-w,--width", a->width, "Decimals of the printed score")
      ->check(CLI::Range(0, 15))
      ->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace headcount::cli
