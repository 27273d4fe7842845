// BLEU and chrF against sacreBLEU: every vector of ../shared/conformance/sacrebleu (sacreBLEU's own
// unit tests and the 16 WMT17 systems), field by field, plus hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"
#include "headcount/eval/tokenizers.h"
#include "test_util.h"

namespace headcount {
namespace {

using nlohmann::json;
using testing::shared_dir;
namespace fs = std::filesystem;

fs::path conformance_dir() {
  return shared_dir() / "conformance" / "sacrebleu";
}

// Lines as sacreBLEU reads a file: UTF-8, one segment a line, trailing whitespace stripped.
std::vector<std::string> read_segments(const fs::path& p) {
  auto lines = io::read_lines(p);
  for (auto& l : lines) l = text::rstrip_py_utf8(l);
  return lines;
}

struct Vector {
  json j;
  std::vector<std::string> hyps;
  std::vector<std::vector<std::string>> refs;
};

Vector load_inputs(const json& v) {
  Vector out{v, {}, {}};
  if (v.contains("hyps_file")) {
    out.hyps = read_segments(conformance_dir() / v["hyps_file"].get<std::string>());
    for (const auto& r : v["refs_files"]) {
      out.refs.push_back(read_segments(conformance_dir() / r.get<std::string>()));
    }
  } else if (!v["hyps"].is_null()) {
    out.hyps = v["hyps"].get<std::vector<std::string>>();
    out.refs = v["refs"].get<std::vector<std::vector<std::string>>>();
  }
  return out;
}

eval::BleuOptions bleu_options(const json& o) {
  eval::BleuOptions b;
  b.tokenize = o.value("tokenize", "13a");
  b.lowercase = o.value("lowercase", false);
  b.smooth_method = o.value("smooth_method", "exp");
  if (o.contains("smooth_value") && !o["smooth_value"].is_null()) {
    b.smooth_value = o["smooth_value"].get<double>();
  }
  b.effective_order = o.value("effective_order", false);
  b.max_ngram_order = o.value("max_ngram_order", 4);
  return b;
}

eval::ChrfOptions chrf_options(const json& o) {
  eval::ChrfOptions c;
  c.char_order = o.value("char_order", 6);
  c.word_order = o.value("word_order", 0);
  c.beta = o.value("beta", 2);
  c.lowercase = o.value("lowercase", false);
  c.whitespace = o.value("whitespace", false);
  c.eps_smoothing = o.value("eps_smoothing", false);
  return c;
}

double tolerance(const json& v) {
  return v["tolerance"].is_null() ? 1e-9 : v["tolerance"].get<double>();
}

void check_bleu(const json& v, const eval::BleuScore& s, const std::string& signature) {
  const json& out = v["sacrebleu_output"];
  const json& exp = v["expected"];
  const std::string name = v["name"];
  if (exp.contains("score")) {
    EXPECT_NEAR(s.score, exp["score"].get<double>(), tolerance(v)) << name;
  }
  // Beyond what the vector asks: every number sacreBLEU printed.
  EXPECT_NEAR(s.score, out["score"].get<double>(), 1e-9) << name;
  EXPECT_EQ(s.counts, out["counts"].get<std::vector<double>>()) << name;
  EXPECT_EQ(s.totals, out["totals"].get<std::vector<double>>()) << name;
  const auto precisions = out["precisions"].get<std::vector<double>>();
  ASSERT_EQ(s.precisions.size(), precisions.size()) << name;
  for (size_t i = 0; i < precisions.size(); ++i) {
    EXPECT_NEAR(s.precisions[i], precisions[i], 1e-9) << name << " precision " << i;
  }
  EXPECT_NEAR(s.bp, out["bp"].get<double>(), 1e-12) << name;
  EXPECT_NEAR(s.ratio, out["ratio"].get<double>(), 1e-12) << name;
  EXPECT_EQ(s.sys_len, out["sys_len"].get<double>()) << name;
  EXPECT_EQ(s.ref_len, out["ref_len"].get<double>()) << name;
  EXPECT_EQ(fmt::format("BLEU = {:.2f} {}", s.score, s.verbose()),
            out["formatted"].get<std::string>())
      << name;
  if (exp.contains("score_str_2dp")) {
    EXPECT_EQ(fmt::format("{:.2f}", s.score), exp["score_str_2dp"].get<std::string>()) << name;
  }
  if (v.contains("signature")) {
    EXPECT_EQ(signature, v["signature"].get<std::string>()) << name;
  }
}

void check_chrf(const json& v, const eval::ChrfScore& s, const std::string& formatted,
                const std::string& signature) {
  const json& out = v["sacrebleu_output"];
  const std::string name = v["name"];
  EXPECT_NEAR(s.score, v["expected"]["score"].get<double>(), tolerance(v)) << name;
  EXPECT_NEAR(s.score, out["score"].get<double>(), 1e-9) << name;
  EXPECT_EQ(s.stats, out["stats"].get<std::vector<std::vector<double>>>()) << name;
  EXPECT_EQ(formatted, out["formatted"].get<std::string>()) << name;
  if (v.contains("signature")) {
    EXPECT_EQ(signature, v["signature"].get<std::string>()) << name;
  }
}

TEST(Conformance, EverySacrebleuVector) {
  const fs::path file = conformance_dir() / "vectors.json";
  if (!fs::exists(file)) {
    if (testing::running_in_ci())
      FAIL() << file << " is missing: CI needs ../shared beside the repo";
    GTEST_SKIP() << file << " not found (set HEADCOUNT_SHARED)";
  }
  const json vectors = json::parse(io::read_file(file));
  ASSERT_GE(vectors.size(), 95u);
  int checked = 0, wmt = 0;
  for (const json& v : vectors) {
    const std::string metric = v["metric"];
    const Vector in = load_inputs(v);
    SCOPED_TRACE(v["name"].get<std::string>());
    if (metric == "bleu" || metric == "sentence_bleu") {
      const eval::Bleu bleu(bleu_options(v["options"]));
      const auto s = metric == "bleu" ? bleu.corpus_score(in.hyps, in.refs)
                                      : bleu.sentence_score(in.hyps.at(0), [&] {
                                          std::vector<std::string> r;
                                          for (const auto& stream : in.refs)
                                            r.push_back(stream.at(0));
                                          return r;
                                        }());
      check_bleu(v, s, bleu.signature(bleu.last_nrefs()));
    } else if (metric == "bleu_from_stats") {
      const eval::Bleu bleu(bleu_options(v["options"]));
      eval::BleuStats st;
      st.correct = v["stats"]["correct"].get<std::vector<double>>();
      st.total = v["stats"]["total"].get<std::vector<double>>();
      st.sys_len = v["stats"]["sys_len"].get<double>();
      st.ref_len = v["stats"]["ref_len"].get<double>();
      check_bleu(v, bleu.score_from_stats(st), "");
    } else if (metric == "chrf" || metric == "sentence_chrf") {
      const eval::Chrf chrf(chrf_options(v["options"]));
      const auto s = chrf.corpus_score(in.hyps, in.refs);
      check_chrf(v, s, fmt::format("{} = {:.2f}", chrf.name(), s.score),
                 chrf.signature(chrf.last_nrefs()));
    } else {
      ADD_FAILURE() << "unknown metric " << metric;
      continue;
    }
    ++checked;
    wmt += v.contains("hyps_file");
  }
  EXPECT_EQ(checked, static_cast<int>(vectors.size()));
  EXPECT_GE(wmt, 16);
}

// Hand-computed: hypothesis "the cat sat" against "the cat sat down" (tokenize none):
// 1-4 gram matches 3/3, 2/2, 1/1, 0/0; BP = exp(1 - 4/3).
TEST(Bleu, HandComputedBrevityPenaltyAndEffectiveOrder) {
  eval::BleuOptions o;
  o.tokenize = "none";
  o.effective_order = true;
  o.smooth_method = "none";
  const auto s = eval::Bleu(o).corpus_score({"the cat sat"}, {{"the cat sat down"}});
  EXPECT_EQ(s.counts, (std::vector<double>{3, 2, 1, 0}));
  EXPECT_EQ(s.totals, (std::vector<double>{3, 2, 1, 0}));
  EXPECT_NEAR(s.bp, std::exp(1.0 - 4.0 / 3.0), 1e-15);
  // Effective order 3: geometric mean of 100, 100, 100.
  EXPECT_NEAR(s.score, 100.0 * std::exp(1.0 - 4.0 / 3.0), 1e-9);
}

TEST(Bleu, ClosestReferenceLengthTiesGoToTheShorter) {
  eval::BleuOptions o;
  o.tokenize = "none";
  // Hypothesis of 3 tokens, references of 2 and 4 tokens: both differ by one, take 2.
  const auto s = eval::Bleu(o).corpus_score({"a b c"}, {{"a b"}, {"a b c d"}});
  EXPECT_EQ(s.ref_len, 2);
}

TEST(Bleu, EmptyReferenceIsAReferenceOfLengthZero) {
  eval::BleuOptions o;
  o.tokenize = "none";
  eval::Bleu bleu(o);
  // Lengths 0 and 8 against a 3-token hypothesis: 0 is closer (3 < 5).
  auto s = bleu.corpus_score({"a b c"}, {{""}, {"a b c d e f g h"}});
  EXPECT_EQ(s.ref_len, 0);
  EXPECT_EQ(bleu.last_nrefs(), 2);
  // Lengths 0 and 4: 4 is closer.
  s = bleu.corpus_score({"a b c"}, {{""}, {"a b c d"}});
  EXPECT_EQ(s.ref_len, 4);
  EXPECT_THROW(bleu.corpus_score({"a", "b"}, {{"a"}}), Error);
}

TEST(Tokenizers, Mteval13aRules) {
  auto tok = [](const char* s) { return text::to_utf8(eval::tokenize_13a(text::to_u32(s))); };
  EXPECT_EQ(tok("Hello, world."), "Hello , world .");
  EXPECT_EQ(tok("3.14 and 1,000"), "3.14 and 1,000");  // no split between digits
  EXPECT_EQ(tok("pages 5-7"), "pages 5 - 7");
  EXPECT_EQ(tok("don't"), "don't");  // the apostrophe is not in the symbol class
  EXPECT_EQ(tok("a&amp;b &lt;x&gt;"), "a & b < x >");
  EXPECT_EQ(tok("x<skipped>y"), "xy");
  // The no-break space is whitespace to Python's split(), so it separates tokens.
  EXPECT_EQ(tok("a\u00a0b"), "a b");
}

TEST(Tokenizers, InternationalUsesUnicodeCategories) {
  auto tok = [](const char* s) { return text::to_utf8(eval::tokenize_intl(text::to_u32(s))); };
  EXPECT_EQ(tok("«Hola», dijo."), "« Hola » , dijo .");
  EXPECT_EQ(tok("3.14"), "3.14");
  EXPECT_EQ(tok("5€"), "5 €");  // Sc is a symbol
  EXPECT_EQ(tok("a.,b"), "a . , b");
}

TEST(Text, PythonWhitespaceAndLowercase) {
  EXPECT_TRUE(text::is_py_space(0xA0));
  EXPECT_TRUE(text::is_py_space(0x3000));
  EXPECT_FALSE(text::is_py_space(0x200B));  // zero-width space is not whitespace in Python
  EXPECT_EQ(text::to_utf8(text::lower(text::to_u32("ÉCOLE İ ΣΟΦΟΣ"))),
            "\u00e9cole i\u0307 \u03c3\u03bf\u03c6\u03bf\u03c2");
}

TEST(Text, FirstLinesKeepsEachNewlineAndEndsTheLastLine) {
  EXPECT_EQ(text::first_lines("a\nb\nc\n", 2), "a\nb\n");
  EXPECT_EQ(text::first_lines("a\nb\nc\n", 25), "a\nb\nc\n");
  EXPECT_EQ(text::first_lines("a\n\nb", 3),
            "a\n\nb\n");  // an empty line counts; the last gets its \n
  EXPECT_EQ(text::first_lines("", 5), "");
  EXPECT_EQ(text::first_lines("a\nb\n", 0), "");
}

TEST(Chrf, HandComputedSingleCharacter) {
  // "ab" vs "ab": every n-gram of order 1 and 2 matches, no orders 3..6: score 100.
  const auto s = eval::Chrf().corpus_score({"ab"}, {{"ab"}});
  EXPECT_DOUBLE_EQ(s.score, 100.0);
  EXPECT_EQ(s.stats[0], (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(s.stats[2], (std::vector<double>{0, 0, 0}));
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

// Random lines over a mix the tokenizers treat differently: ASCII letters, digits, the 13a symbol
// class, '.', ',', '-', Unicode letters, punctuation (Pd, Ps, Pe, Pi, Pf, Po), symbols (Sc, Sm,
// So), numbers (No, Nd outside ASCII), and Python whitespace (no-break, ideographic, tab).
std::vector<std::string> random_lines(int count, unsigned seed) {
  const std::u32string alphabet =
      U"abcXYZ0123456789 .,-'\"&;<>/()[]{}!?:@#$%^_`~|+=*\\"
      U"éñßΣσς中文\u00a0\u3000\t\u2013\u2014\u00ab\u00bb\u201c\u201d\u2019\u00bf\u00a1"
      U"\u20ac\u00a3\u00b1\u00d7\u2192\u00a9\u00bd\u00b2\u0663\u2160\U0001F600\u0301";
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::u32string s;
    const int len = static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) s.push_back(alphabet[rng() % alphabet.size()]);
    // Some lines carry the 13a entities and <skipped>.
    if (i % 7 == 0) s += U" &amp;quot; &lt;b&gt; <skipped> x&quot;y";
    out.push_back(text::to_utf8(s));
  }
  return out;
}

TEST(Tokenizers, MatchPythonRegexReference) {
  const bool have_python = std::system("/usr/bin/python3 -c 'import regex' >/dev/null 2>&1") == 0;
  if (!have_python) {
    if (testing::running_in_ci()) FAIL() << "python3-regex missing: the set-up must install it";
    GTEST_SKIP() << "/usr/bin/python3 with the regex module is not available";
  }
  testing::TempDir dir;
  const auto lines = random_lines(3000, 12345);
  io::write_lines_atomic(dir / "in.txt", lines);
  const fs::path script = testing::source_dir() / "tests/reference/sacrebleu_tokenizers.py";
  for (const std::string tok : {"13a", "intl", "char"}) {
    const std::string cmd = fmt::format("/usr/bin/python3 {} {} < {} > {}", script.string(), tok,
                                        (dir / "in.txt").string(), (dir / "out.txt").string());
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const auto expected = io::read_lines(dir / "out.txt", {.allow_empty_file = true});
    ASSERT_EQ(expected.size(), lines.size()) << tok;
    int mismatches = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string got = text::to_utf8(eval::tokenize(tok, text::to_u32(lines[i])));
      if (got != expected[i] && ++mismatches <= 5) {
        ADD_FAILURE() << tok << " line " << i << "\n input: " << lines[i] << "\n   got: " << got
                      << "\nexpect: " << expected[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << tok;
  }
}

}  // namespace
}  // namespace headcount
