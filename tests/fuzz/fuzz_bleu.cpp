// libFuzzer target: the BLEU tokenizers (13a, intl, char, none) and corpus/sentence BLEU and
// chrF/chrF++. Input: hypothesis lines, a NUL, reference lines; the first byte picks options.
#include <cmath>

#include "fuzz_util.h"
#include "headcount/common/text.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"
#include "headcount/eval/tokenizers.h"

namespace {

bool in_range(double score) {
  return std::isfinite(score) && score >= 0 && score <= 100.0001;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headcount;
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  const auto parts = fuzz::split_input(data + 1, size - 1, 2);
  const std::vector<std::string> hyps = text::split(parts[0], '\n');
  const std::vector<std::string> refs =
      parts.size() > 1 ? text::split(parts[1], '\n') : std::vector<std::string>(hyps.size());
  static const char* const kTokenizers[] = {"13a", "intl", "char", "none"};
  fuzz::expect_clear_error_or_success([&] {
    for (const auto& line : hyps) {
      for (const char* name : kTokenizers) eval::tokenize(name, text::to_u32(line));
    }
  });
  fuzz::expect_clear_error_or_success([&] {
    eval::BleuOptions o;
    o.tokenize = kTokenizers[pick & 3];
    o.lowercase = pick & 4;
    static const char* const kSmooth[] = {"exp", "floor", "add-k", "none"};
    o.smooth_method = kSmooth[(pick >> 3) & 3];
    const eval::Bleu bleu(o);
    const auto score = bleu.corpus_score(hyps, {refs});
    if (!in_range(score.score)) std::abort();
    if (!hyps.empty() && !refs.empty()) {
      if (!in_range(bleu.sentence_score(hyps[0], {refs[0]}).score)) std::abort();
    }
  });
  fuzz::expect_clear_error_or_success([&] {
    eval::ChrfOptions o;
    o.word_order = (pick & 32) ? 2 : 0;
    o.lowercase = pick & 64;
    o.whitespace = pick & 128;
    const eval::Chrf chrf(o);
    if (!in_range(chrf.corpus_score(hyps, {refs}).score)) std::abort();
  });
  return 0;
}
