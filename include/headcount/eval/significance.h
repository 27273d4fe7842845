// Paired significance tests for corpus-level metrics, with sacreBLEU 2.x's definitions (its
// --paired-bs and --paired-ar): paired bootstrap resampling (Koehn 2004) and paired approximate
// randomization (Riezler and Maxwell 2005), on per-segment sufficient statistics, so that every
// resample is scored exactly as the corpus is (BLEU's brevity penalty and n-gram precisions on
// summed counts, chrF's F-score on summed n-gram counts).
//
// Two deliberate differences from sacreBLEU: the random numbers are mt19937_64's, not numpy's
// (p-values and intervals agree with sacreBLEU's to sampling error, not to the digit), and a
// resampled statistic equal to the observed one counts as at least as extreme (the usual
// permutation-test convention: a system compared with itself gets p = 1, where sacreBLEU's strict
// ">" reports 1/(n+1)).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"

namespace headcount::eval {

// Segment i's sufficient statistics: any fixed-length vector that adds up over segments.
using SegmentStats = std::vector<std::vector<double>>;
// The metric of a corpus from its summed statistics.
using ScoreFromStats = std::function<double(const std::vector<double>&)>;

struct BootstrapInterval {
  double mean = 0;  // mean of the resampled scores
  double ci = 0;    // half the width of the central 95% of them (sacreBLEU's "± ci")
};

struct PairedTestResult {
  std::string test;  // "bs" or "ar"
  int samples = 0;   // resamples (bs) or trials (ar)
  uint64_t seed = 0;
  double baseline_score = 0;
  double system_score = 0;
  BootstrapInterval baseline;  // bootstrap mean and 95% interval (both tests)
  BootstrapInterval system;
  double p_value = 1;  // two-sided, for the null hypothesis "the systems are equally good"
};

struct PairedTestOptions {
  std::string test = "bs";  // bs | ar
  int samples = 0;          // 0: 1000 resamples for bs, 10000 trials for ar (sacreBLEU's)
  int ci_samples = 1000;    // bootstrap resamples for the intervals under ar
  uint64_t seed = 12345;    // sacreBLEU's default seed value
};

// A uniform index in [0, n) from one 64-bit draw (multiply-shift; bias below n / 2^64).
inline uint64_t uniform_index(uint64_t draw, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(draw) * n) >> 64);
}

// The bootstrap resamples used by paired_test: `samples` rows of n segment indices drawn with
// replacement. Public so that a caller (or a test) can rebuild a resampled corpus.
std::vector<std::vector<uint32_t>> bootstrap_indices(size_t n, int samples, uint64_t seed);

// The sorted-sample mean and 95% interval of sacreBLEU's estimate_ci: the interval runs from the
// (n/40)-th smallest to the (n/40)-th largest score.
BootstrapInterval estimate_interval(std::vector<double> scores);

// Compares `system` against `baseline` (the same segments, line by line). Throws headcount::Error
// on mismatched sizes, no segments, or an unknown test.
PairedTestResult paired_test(const SegmentStats& baseline, const SegmentStats& system,
                             const ScoreFromStats& score, const PairedTestOptions& options = {});

// BLEU's and chrF's per-segment statistics in this form (BLEU: hypothesis length, reference
// length, matching n-grams per order, hypothesis n-grams per order) and the scores of summed
// statistics, exactly as their corpus_score computes them. The metric objects must outlive the
// returned scoring functions.
SegmentStats bleu_segment_stats(const Bleu& bleu, const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs);
ScoreFromStats bleu_scorer(const Bleu& bleu);
SegmentStats chrf_segment_stats(const Chrf& chrf, const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs);
ScoreFromStats chrf_scorer(const Chrf& chrf);

// A paired test of `system` against `baseline` (both scored against `refs`) under one metric:
// the metric's name and signature with the test's result.
struct PairedComparison {
  std::string name;  // "BLEU", "chrF2", ...
  std::string signature;
  PairedTestResult result;
};
PairedComparison paired_compare(const BleuOptions& metric, const std::vector<std::string>& baseline,
                                const std::vector<std::string>& system,
                                const std::vector<std::vector<std::string>>& refs,
                                const PairedTestOptions& options);
PairedComparison paired_compare(const ChrfOptions& metric, const std::vector<std::string>& baseline,
                                const std::vector<std::string>& system,
                                const std::vector<std::vector<std::string>>& refs,
                                const PairedTestOptions& options);

}  // namespace headcount::eval
