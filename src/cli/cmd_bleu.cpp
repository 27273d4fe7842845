// headcount bleu: BLEU and chrF exactly as sacreBLEU 2.x computes them.
#include <cstdint>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"
#include "headcount/eval/sacrebleu_output.h"
#include "headcount/eval/significance.h"

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
  std::string paired_bs;  // baseline hypothesis file for a paired test
  std::string paired_ar;
  int paired_n = 0;
  uint64_t paired_seed = 12345;
};

eval::BleuOptions bleu_options(const BleuArgs& a) {
  eval::BleuOptions o;
  o.tokenize = a.tokenize;
  o.lowercase = a.lowercase;
  o.smooth_method = a.smooth;
  o.smooth_value = a.smooth_value;
  o.max_ngram_order = a.max_ngram_order;
  o.effective_order = a.sentence;  // sacreBLEU's sentence-level BLEU uses the effective order
  return o;
}

eval::ChrfOptions chrf_options(const BleuArgs& a) {
  eval::ChrfOptions o;
  o.char_order = a.chrf_char_order;
  o.word_order = a.chrf_word_order;
  o.beta = a.chrf_beta;
  o.lowercase = a.lowercase;
  o.whitespace = a.chrf_whitespace;
  o.eps_smoothing = a.chrf_eps;
  return o;
}

// As sacreBLEU reads its inputs: UTF-8 lines, trailing whitespace stripped. "-" is stdin.
std::vector<std::string> read_segments(const std::string& path) {
  auto lines = io::read_lines_or_stdin(path, {.allow_empty_file = true});
  for (auto& l : lines) l = text::rstrip_py_utf8(l);
  return lines;
}

eval::OutputStyle output_style(const BleuArgs& a) {
  return {.width = a.width, .json = a.json, .score_only = a.score_only, .compact = a.sentence};
}

// The hypothesis against a baseline's on the same segments: both scores, their bootstrap means
// and 95% intervals, and the p-value of the paired test (sacreBLEU's --paired-bs / --paired-ar).
void run_paired(const BleuArgs& a, const std::vector<std::string>& hyps,
                const std::vector<std::vector<std::string>>& refs) {
  const bool bs = !a.paired_bs.empty();
  const std::string& base_path = bs ? a.paired_bs : a.paired_ar;
  const auto base = read_segments(base_path);
  HC_CHECK(base.size() == hyps.size(),
           "the baseline {} has {} lines but the hypothesis {} has {}: a paired test needs the "
           "same segments, line by line",
           base_path, base.size(), a.hyp == "-" ? "<stdin>" : a.hyp, hyps.size());
  eval::PairedTestOptions po;
  po.test = bs ? "bs" : "ar";
  po.samples = a.paired_n;
  po.seed = a.paired_seed;
  const auto cmp = a.metric == "bleu" ? eval::paired_compare(bleu_options(a), base, hyps, refs, po)
                                      : eval::paired_compare(chrf_options(a), base, hyps, refs, po);
  std::puts(eval::format_paired(cmp, base_path, a.hyp, output_style(a)).c_str());
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
  if (!a.paired_bs.empty() || !a.paired_ar.empty()) {
    HC_CHECK(!a.sentence,
             "--sentence and a paired test (--paired-bs, --paired-ar) exclude each "
             "other: the test compares corpus scores");
    run_paired(a, hyps, refs);
    return;
  }

  if (a.metric == "bleu") {
    const eval::Bleu bleu(bleu_options(a));
    if (a.sentence) {
      const auto stats = bleu.sentence_stats(hyps, refs);
      for (const auto& st : stats) {
        // Each sentence's own reference count, as sacreBLEU's sentence_score sees it.
        std::puts(eval::format_bleu(bleu.score_from_stats(st), bleu.signature(bleu.last_nrefs()),
                                    output_style(a))
                      .c_str());
      }
    } else {
      const auto s = bleu.corpus_score(hyps, refs);
      std::puts(eval::format_bleu(s, bleu.signature(bleu.last_nrefs()), output_style(a)).c_str());
    }
  } else {
    const eval::Chrf chrf(chrf_options(a));
    if (a.sentence) {
      for (size_t i = 0; i < hyps.size(); ++i) {
        std::vector<std::string> r;
        for (const auto& stream : refs) r.push_back(stream[i]);
        const auto s = chrf.sentence_score(hyps[i], r);
        std::puts(
            eval::format_chrf(s, chrf.name(), chrf.signature(chrf.last_nrefs()), output_style(a))
                .c_str());
      }
    } else {
      const auto s = chrf.corpus_score(hyps, refs);
      std::puts(
          eval::format_chrf(s, chrf.name(), chrf.signature(chrf.last_nrefs()), output_style(a))
              .c_str());
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
                  "Value for floor (default 0.1) and add-k (default 1) smoothing")
      ->check(number_in(0, 1e6));  // a count or a share added to n-gram matches
  cmd->add_option("--max-ngram-order", a->max_ngram_order, "BLEU's largest n-gram order")
      ->check(integer_in(1, 20))
      ->capture_default_str();
  cmd->add_flag("--sentence", a->sentence,
                "One score per line (BLEU with the effective order, as sacreBLEU's "
                "sentence-level mode)");
  cmd->add_option("--chrf-char-order", a->chrf_char_order, "chrF character n-gram order")
      ->check(integer_in(1, 20))
      ->capture_default_str();
  cmd->add_option("--chrf-word-order", a->chrf_word_order, "chrF word n-gram order (2: chrF++)")
      ->check(integer_in(0, 10))
      ->capture_default_str();
  cmd->add_option("--chrf-beta", a->chrf_beta, "chrF recall weight")
      ->check(integer_in(1, 100))
      ->capture_default_str();
  cmd->add_flag("--chrf-whitespace", a->chrf_whitespace, "Keep whitespace in character n-grams");
  cmd->add_flag("--chrf-eps-smoothing", a->chrf_eps,
                "chrF's eps smoothing (chrF++.py) instead of the effective-order average");
  cmd->add_flag("--json", a->json, "Print a JSON object (one per line with --sentence)");
  cmd->add_flag("-b,--score-only", a->score_only, "Print the score alone");
  cmd->add_option("-w,--width", a->width, "Decimals of the printed score")
      ->check(integer_in(0, 15))
      ->capture_default_str();
  auto* bs = cmd->add_option("--paired-bs", a->paired_bs,
                             "Paired bootstrap resampling test of the hypothesis against this "
                             "baseline hypothesis file (same segments): both scores with their "
                             "bootstrap mean and 95% interval, and the p-value")
                 ->check(CLI::ExistingFile);
  auto* ar = cmd->add_option("--paired-ar", a->paired_ar,
                             "Paired approximate randomization test against this baseline "
                             "hypothesis file")
                 ->check(CLI::ExistingFile);
  bs->excludes(ar);
  cmd->add_option("--paired-n", a->paired_n,
                  "Resamples (bootstrap) or trials (randomization); 0: 1000 and 10000")
      ->check(integer_in(0, 10000000))
      ->capture_default_str();
  cmd->add_option("--paired-seed", a->paired_seed, "Seed of the paired test's random numbers")
      ->check(integer_in(0, INT64_MAX))
      ->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace headcount::cli
