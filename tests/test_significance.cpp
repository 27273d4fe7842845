// Paired significance tests: against exhaustive enumeration (every bootstrap resample or every
// swap pattern of a small corpus, scored by corpus_score on rebuilt text), against the p-values
// sacreBLEU's own test suite takes from Moses' and multeval's implementations for the 16 WMT17
// English-German systems, and by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>

#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/eval/significance.h"
#include "headcount/sweep/report.h"
#include "test_util.h"

namespace headcount {
namespace {

using eval::PairedTestOptions;
namespace fs = std::filesystem;

// A small Bible-like corpus: two systems of different quality against one reference.
struct Corpus {
  std::vector<std::string> ref, good, mid, bad;
};

Corpus small_corpus(size_t n) {
  const std::vector<std::string> words = {"the",   "lord", "said", "unto", "moses", "and",
                                          "aaron", "in",   "land", "of",   "egypt", "saying"};
  std::mt19937 rng(7);
  Corpus c;
  for (size_t i = 0; i < n; ++i) {
    std::string r, g, m, b;
    const size_t len = 4 + rng() % 6;
    for (size_t k = 0; k < len; ++k) {
      const std::string& w = words[rng() % words.size()];
      r += (k ? " " : "") + w;
      // good replaces about 1 word in 5 (some by themselves), mid 1 in 3, bad 1 in 2.
      g += (k ? " " : "") + (rng() % 5 == 0 ? words[rng() % words.size()] : w);
      m += (k ? " " : "") + (rng() % 3 == 0 ? words[rng() % words.size()] : w);
      b += (k ? " " : "") + (rng() % 2 == 0 ? words[rng() % words.size()] : w);
    }
    c.ref.push_back(r);
    c.good.push_back(g);
    c.mid.push_back(m);
    c.bad.push_back(b);
  }
  return c;
}

std::vector<std::string> pick(const std::vector<std::string>& v, const std::vector<uint32_t>& idx) {
  std::vector<std::string> out;
  for (uint32_t i : idx) out.push_back(v[i]);
  return out;
}

TEST(Significance, SummedStatisticsScoreAsTheCorpus) {
  const auto c = small_corpus(25);
  const std::vector<std::vector<std::string>> refs = {c.ref, c.good};  // two reference streams
  for (const std::string smooth : {"exp", "floor", "add-k", "none"}) {
    eval::BleuOptions o;
    o.smooth_method = smooth;
    const eval::Bleu bleu(o);
    const auto stats = eval::bleu_segment_stats(bleu, c.bad, refs);
    std::vector<double> sum(stats[0].size(), 0.0);
    for (const auto& s : stats)
      for (size_t k = 0; k < s.size(); ++k) sum[k] += s[k];
    EXPECT_DOUBLE_EQ(eval::bleu_scorer(bleu)(sum), bleu.corpus_score(c.bad, refs).score) << smooth;
  }
  for (int word_order : {0, 2}) {
    eval::ChrfOptions o;
    o.word_order = word_order;
    const eval::Chrf chrf(o);
    const auto stats = eval::chrf_segment_stats(chrf, c.bad, refs);
    std::vector<double> sum(stats[0].size(), 0.0);
    for (const auto& s : stats)
      for (size_t k = 0; k < s.size(); ++k) sum[k] += s[k];
    EXPECT_DOUBLE_EQ(eval::chrf_scorer(chrf)(sum), chrf.corpus_score(c.bad, refs).score);
  }
}

TEST(Significance, BootstrapScoresEachResampleAsItsRebuiltCorpus) {
  // The means and 95% intervals of paired_test equal those of corpus_score over the resampled
  // text (the same resamples, rebuilt line by line), computed here without summing statistics.
  const auto c = small_corpus(30);
  const eval::Bleu bleu;
  PairedTestOptions po;
  po.samples = 200;
  po.seed = 99;
  const auto r = eval::paired_test(eval::bleu_segment_stats(bleu, c.bad, {c.ref}),
                                   eval::bleu_segment_stats(bleu, c.good, {c.ref}),
                                   eval::bleu_scorer(bleu), po);
  std::vector<double> base, sys;
  for (const auto& idx : eval::bootstrap_indices(c.ref.size(), po.samples, po.seed)) {
    base.push_back(bleu.corpus_score(pick(c.bad, idx), {pick(c.ref, idx)}).score);
    sys.push_back(bleu.corpus_score(pick(c.good, idx), {pick(c.ref, idx)}).score);
  }
  // Hand-written sacreBLEU estimate_ci: sorted, the 5th smallest and 5th largest of 200.
  auto interval = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    double mean = 0;
    for (double x : v) mean += x / v.size();
    return std::make_pair(mean, 0.5 * (v[194] - v[5]));
  };
  EXPECT_NEAR(r.baseline.mean, interval(base).first, 1e-9);
  EXPECT_NEAR(r.baseline.ci, interval(base).second, 1e-9);
  EXPECT_NEAR(r.system.mean, interval(sys).first, 1e-9);
  EXPECT_NEAR(r.system.ci, interval(sys).second, 1e-9);
  EXPECT_DOUBLE_EQ(r.baseline_score, bleu.corpus_score(c.bad, {c.ref}).score);
  EXPECT_DOUBLE_EQ(r.system_score, bleu.corpus_score(c.good, {c.ref}).score);
  EXPECT_GT(r.system_score, r.baseline_score + 10);
  EXPECT_LT(r.p_value, 0.01);
  // The p-value by its definition: |sys - base| per resample, centred, against the observed gap.
  std::vector<double> d;
  double mean = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    d.push_back(std::fabs(sys[i] - base[i]));
    mean += d.back() / base.size();
  }
  size_t extreme = 0;
  for (double x : d) extreme += x - mean >= r.system_score - r.baseline_score;
  EXPECT_DOUBLE_EQ(r.p_value, (extreme + 1.0) / (po.samples + 1.0));
}

TEST(Significance, BootstrapIndicesAreUniformAndReproducible) {
  const auto a = eval::bootstrap_indices(7, 3000, 5);
  EXPECT_EQ(a, eval::bootstrap_indices(7, 3000, 5));
  EXPECT_NE(a, eval::bootstrap_indices(7, 3000, 6));
  std::vector<double> counts(7, 0.0);
  for (const auto& row : a)
    for (uint32_t i : row) counts.at(i) += 1;
  // 21,000 draws: each index 3,000 expected, standard deviation ~50.
  for (double n : counts) EXPECT_NEAR(n, 3000, 250);
  EXPECT_EQ(eval::uniform_index(0, 3), 0u);
  EXPECT_EQ(eval::uniform_index(~0ULL, 3), 2u);
  EXPECT_EQ(eval::uniform_index(1ULL << 63, 4), 2u);
}

TEST(Significance, ApproximateRandomizationMatchesExhaustiveEnumeration) {
  // 10 segments: all 1,024 swap patterns scored by corpus_score on swapped text give the exact
  // randomization p-value; 20,000 sampled trials must land within sampling error of it.
  const auto c = small_corpus(10);
  const eval::Bleu bleu;
  const double observed =
      std::fabs(bleu.corpus_score(c.good, {c.ref}).score - bleu.corpus_score(c.mid, {c.ref}).score);
  size_t extreme = 0;
  for (uint32_t mask = 0; mask < 1024; ++mask) {
    std::vector<std::string> a, b;
    for (size_t i = 0; i < 10; ++i) {
      const bool swap = (mask >> i) & 1;
      a.push_back(swap ? c.good[i] : c.mid[i]);
      b.push_back(swap ? c.mid[i] : c.good[i]);
    }
    const double d =
        std::fabs(bleu.corpus_score(a, {c.ref}).score - bleu.corpus_score(b, {c.ref}).score);
    extreme += d >= observed - 1e-9;
  }
  const double exact = extreme / 1024.0;
  std::cout << "exact randomization p-value: " << exact << "\n";
  ASSERT_GT(exact, 0.02);  // a corpus where the answer is neither 0 nor 1
  ASSERT_LT(exact, 0.9);
  PairedTestOptions po;
  po.test = "ar";
  po.samples = 20000;
  const auto r = eval::paired_test(eval::bleu_segment_stats(bleu, c.mid, {c.ref}),
                                   eval::bleu_segment_stats(bleu, c.good, {c.ref}),
                                   eval::bleu_scorer(bleu), po);
  const double se = std::sqrt(exact * (1 - exact) / po.samples);
  EXPECT_NEAR(r.p_value, exact, 4 * se + 1e-4) << "exact " << exact;
  EXPECT_GT(r.baseline.ci, 0.0);  // intervals from 1,000 bootstrap resamples
}

TEST(Significance, ASystemAgainstItselfAndAgainstAPerfectOne) {
  const auto c = small_corpus(40);
  const eval::Bleu bleu;
  const auto bad = eval::bleu_segment_stats(bleu, c.bad, {c.ref});
  const auto perfect = eval::bleu_segment_stats(bleu, c.ref, {c.ref});
  for (const std::string test : {"bs", "ar"}) {
    PairedTestOptions po;
    po.test = test;
    po.samples = 500;
    // The same output: no difference can be told from chance.
    auto r = eval::paired_test(bad, bad, eval::bleu_scorer(bleu), po);
    EXPECT_EQ(r.p_value, 1.0) << test;
    EXPECT_EQ(r.system_score, r.baseline_score);
    // The references themselves against a poor system: no resample or swap reaches the observed
    // gap (swapping all or none of 40 segments, probability 2^-39, does not occur in 500 trials).
    r = eval::paired_test(bad, perfect, eval::bleu_scorer(bleu), po);
    EXPECT_DOUBLE_EQ(r.system_score, 100.0);
    EXPECT_DOUBLE_EQ(r.p_value, 1.0 / 501.0) << test;
    EXPECT_EQ(r.samples, 500);
  }
  PairedTestOptions defaults;
  EXPECT_EQ(eval::paired_test(bad, bad, eval::bleu_scorer(bleu), defaults).samples, 1000);
  defaults.test = "ar";
  defaults.ci_samples = 0;
  EXPECT_EQ(eval::paired_test(bad, bad, eval::bleu_scorer(bleu), defaults).samples, 10000);
}

// The reports' paired test of two translation files (`headcount table`, `report`), which keeps each
// file's n-gram statistics for the process: equal to the test computed from the texts, and a file
// rewritten between two calls is read again.
TEST(Significance, ReportsPairedTestOfFilesFollowsTheFilesOnDisk) {
  const auto c = small_corpus(60);
  testing::TempDir dir;
  const auto write = [&](const std::string& name, const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    io::write_file_atomic(dir / name, text);
    return dir / name;
  };
  const auto ref = write("ref.txt", c.ref), base = write("base.txt", c.mid);
  const eval::Bleu bleu;
  const auto direct = [&](const std::vector<std::string>& system) {
    return eval::paired_test(eval::bleu_segment_stats(bleu, c.mid, {c.ref}),
                             eval::bleu_segment_stats(bleu, system, {c.ref}),
                             eval::bleu_scorer(bleu))
        .p_value;
  };
  const auto system = write("system.txt", c.mid);
  EXPECT_EQ(sweep::paired_bleu_p(system, base, ref), 1.0);  // the same translations
  write("system.txt", c.good);
  const double p = direct(c.good);
  EXPECT_LT(p, 1.0);
  EXPECT_EQ(sweep::paired_bleu_p(system, base, ref), p);
  EXPECT_EQ(sweep::paired_bleu_p(system, base, ref), p);  // from the kept statistics
  write("system.txt", c.bad);
  EXPECT_EQ(sweep::paired_bleu_p(system, base, ref), direct(c.bad));
}

TEST(Significance, IntervalAsSacrebleusEstimateCi) {
  std::vector<double> v;
  for (int i = 80; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  const auto ci = eval::estimate_interval(v);
  EXPECT_DOUBLE_EQ(ci.mean, 40.5);
  EXPECT_DOUBLE_EQ(ci.ci, 0.5 * (78 - 3));  // indices 2 and 77 of 80
}

TEST(Significance, BadInputIsAClearError) {
  const eval::Bleu bleu;
  const auto c = small_corpus(5);
  const auto s5 = eval::bleu_segment_stats(bleu, c.bad, {c.ref});
  const auto s4 = eval::SegmentStats(s5.begin(), s5.begin() + 4);
  EXPECT_NE(testing::error_of([&] {
              eval::paired_test(s5, s4, eval::bleu_scorer(bleu));
            }).find("the baseline has 5 segments and the system 4"),
            std::string::npos);
  PairedTestOptions po;
  po.test = "t-test";
  EXPECT_NE(testing::error_of([&] {
              eval::paired_test(s5, s5, eval::bleu_scorer(bleu), po);
            }).find("bs or ar"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              eval::paired_test({}, {}, eval::bleu_scorer(bleu));
            }).find("no segments"),
            std::string::npos);
}

// sacreBLEU's test_significance.py: the WMT17 English-German systems against LIUM-NMT (tokenize
// none), with the p-values it checks its own implementation against (within 0.01): Moses'
// bootstrap script (2,000 resamples, mean of 3 runs) and multeval's approximate randomization
// (10,000 trials). Ours use other random numbers, so the tolerance here is that 0.01 plus three
// standard errors of a sampled p-value.
struct Wmt17 {
  const char* system;
  double moses_bs;
  double multeval_ar;
};
constexpr Wmt17 kWmt17[] = {
    {"C-3MA.4959", 0.00000, 0.0001},
    {"FBK.4870", 0.01267, 0.0218},
    {"KIT.4950", 0.02233, 0.0410},
    {"LMU-nmt-reranked.4934", 0.04383, 0.09029},
    {"LMU-nmt-single.4893", 0.20783, 0.58494},
    {"online-A.0", 0.00000, 0.0001},
    {"online-B.0", 0.38100, 0.94111},
    {"online-F.0", 0.00000, 0.0001},
    {"online-G.0", 0.00000, 0.0001},
    {"PROMT-Rule-based.4735", 0.00000, 0.0001},
    {"RWTH-nmt-ensemble.4921", 0.01167, 0.0207},
    {"SYSTRAN.4847", 0.20983, 0.59914},
    {"TALP-UPC.4834", 0.00000, 0.0001},
    {"uedin-nmt.4722", 0.00000, 0.0001},
    {"xmu.4910", 0.25483, 0.71073},
};

std::vector<std::string> wmt17(const std::string& name) {
  const fs::path dir = testing::shared_dir() / "conformance" / "sacrebleu" / "wmt17_en_de";
  // sacreBLEU's test strips the lines; with tokenize none (a split on whitespace) that is the
  // same as stripping trailing whitespace only.
  auto lines = io::read_lines(dir / name);
  for (auto& l : lines) l = text::rstrip_py_utf8(l);
  return lines;
}

TEST(Significance, Wmt17PValuesAgreeWithMosesAndMultevalAsSacrebleusTestsDo) {
  const fs::path dir = testing::shared_dir() / "conformance" / "sacrebleu" / "wmt17_en_de";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  eval::BleuOptions o;
  o.tokenize = "none";
  const eval::Bleu bleu(o);
  const auto refs = std::vector<std::vector<std::string>>{wmt17("newstest2017-ende-ref.de.txt")};
  const auto base =
      eval::bleu_segment_stats(bleu, wmt17("newstest2017.LIUM-NMT.4900.en-de.txt"), refs);
  for (const auto& s : kWmt17) {
    const auto sys = eval::bleu_segment_stats(
        bleu, wmt17(std::string("newstest2017.") + s.system + ".en-de.txt"), refs);
    PairedTestOptions bs;
    bs.samples = 2000;
    const double p_bs = eval::paired_test(base, sys, eval::bleu_scorer(bleu), bs).p_value;
    EXPECT_NEAR(p_bs, s.moses_bs, 0.01 + 3 * std::sqrt(s.moses_bs * (1 - s.moses_bs) / 2000))
        << s.system;
    PairedTestOptions ar;
    ar.test = "ar";
    ar.ci_samples = 0;
    const double p_ar = eval::paired_test(base, sys, eval::bleu_scorer(bleu), ar).p_value;
    std::cout << s.system << ": bootstrap p " << p_bs << " (Moses " << s.moses_bs
              << "), randomization p " << p_ar << " (multeval " << s.multeval_ar << ")\n";
    EXPECT_NEAR(p_ar, s.multeval_ar,
                0.01 + 3 * std::sqrt(s.multeval_ar * (1 - s.multeval_ar) / 10000))
        << s.system;
  }
}

}  // namespace
}  // namespace headcount
