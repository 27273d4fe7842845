#include "headcount/eval/significance.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "headcount/common/check.h"

namespace headcount::eval {
namespace {

std::vector<double> sum_all(const SegmentStats& stats) {
  std::vector<double> sum(stats.front().size(), 0.0);
  for (const auto& s : stats)
    for (size_t k = 0; k < sum.size(); ++k) sum[k] += s[k];
  return sum;
}

// (#{x >= observed} + 1) / (n + 1), with a relative tolerance for ties that floating-point sums
// in another order would otherwise break.
double p_value(const std::vector<double>& resampled, double observed) {
  const double tol = 1e-9 * std::max(1.0, std::fabs(observed));
  size_t at_least = 0;
  for (double x : resampled) at_least += x >= observed - tol;
  return static_cast<double>(at_least + 1) / static_cast<double>(resampled.size() + 1);
}

// Both systems' scores on the same bootstrap resamples, the indices drawn as bootstrap_indices
// draws them (row by row from one generator) but one resample at a time, so that memory does not
// grow with samples x segments.
std::pair<std::vector<double>, std::vector<double>> bootstrap_scores(const SegmentStats& a,
                                                                     const SegmentStats& b,
                                                                     int samples, uint64_t seed,
                                                                     const ScoreFromStats& score) {
  std::mt19937_64 rng(seed);
  const size_t n = a.size(), width = a.front().size();
  std::vector<double> out_a, out_b, sum_a(width), sum_b(width);
  out_a.reserve(samples);
  out_b.reserve(samples);
  for (int t = 0; t < samples; ++t) {
    std::fill(sum_a.begin(), sum_a.end(), 0.0);
    std::fill(sum_b.begin(), sum_b.end(), 0.0);
    for (size_t i = 0; i < n; ++i) {
      const size_t r = uniform_index(rng(), n);
      for (size_t k = 0; k < width; ++k) {
        sum_a[k] += a[r][k];
        sum_b[k] += b[r][k];
      }
    }
    out_a.push_back(score(sum_a));
    out_b.push_back(score(sum_b));
  }
  return {std::move(out_a), std::move(out_b)};
}

void check_stats(const SegmentStats& stats, size_t width, const char* which) {
  for (size_t i = 0; i < stats.size(); ++i) {
    HC_CHECK(stats[i].size() == width,
             "paired test: segment {} of the {} has {} statistics, segment 0 of the baseline {}", i,
             which, stats[i].size(), width);
  }
}

}  // namespace

std::vector<std::vector<uint32_t>> bootstrap_indices(size_t n, int samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint32_t>> idx(samples, std::vector<uint32_t>(n));
  for (auto& rows : idx)
    for (auto& r : rows) r = static_cast<uint32_t>(uniform_index(rng(), n));
  return idx;
}

BootstrapInterval estimate_interval(std::vector<double> scores) {
  BootstrapInterval out;
  if (scores.empty()) return out;
  std::sort(scores.begin(), scores.end());
  const size_t n = scores.size();
  const size_t lower = n / 40;
  const size_t upper = n - lower - 1;
  double sum = 0;
  for (double s : scores) sum += s;
  out.mean = sum / static_cast<double>(n);
  out.ci = 0.5 * (scores[upper] - scores[lower]);
  return out;
}

PairedTestResult paired_test(const SegmentStats& baseline, const SegmentStats& system,
                             const ScoreFromStats& score, const PairedTestOptions& options) {
  HC_CHECK(options.test == "bs" || options.test == "ar",
           "paired test: the test must be bs or ar, got '{}'", options.test);
  HC_CHECK(!baseline.empty(), "paired test: no segments");
  HC_CHECK(baseline.size() == system.size(),
           "paired test: the baseline has {} segments and the system {}: they must be the same "
           "segments, line by line",
           baseline.size(), system.size());
  HC_CHECK(options.samples >= 0 && options.ci_samples >= 0,
           "paired test: the number of samples must not be negative");
  const size_t width = baseline.front().size();
  check_stats(baseline, width, "baseline");
  check_stats(system, width, "system");

  PairedTestResult r;
  r.test = options.test;
  r.seed = options.seed;
  r.samples = options.samples > 0 ? options.samples : (options.test == "bs" ? 1000 : 10000);
  r.baseline_score = score(sum_all(baseline));
  r.system_score = score(sum_all(system));
  const double observed = std::fabs(r.system_score - r.baseline_score);
  const size_t n = baseline.size();

  if (options.test == "bs") {
    // Both systems scored on the same resamples; the resampled differences, centred on their
    // mean, estimate the distribution of the difference under the null hypothesis.
    const auto [bl, sys] = bootstrap_scores(baseline, system, r.samples, options.seed, score);
    r.baseline = estimate_interval(bl);
    r.system = estimate_interval(sys);
    std::vector<double> diff(bl.size());
    double mean = 0;
    for (size_t i = 0; i < diff.size(); ++i) {
      diff[i] = std::fabs(sys[i] - bl[i]);
      mean += diff[i];
    }
    mean /= static_cast<double>(diff.size());
    for (double& d : diff) d -= mean;
    r.p_value = p_value(diff, observed);
    return r;
  }

  // Approximate randomization: each trial swaps each segment's two outputs with probability 1/2.
  std::mt19937_64 rng(options.seed);
  std::vector<double> diff;
  diff.reserve(r.samples);
  std::vector<double> a(width), b(width);
  for (int t = 0; t < r.samples; ++t) {
    std::fill(a.begin(), a.end(), 0.0);
    std::fill(b.begin(), b.end(), 0.0);
    uint64_t bits = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i % 64 == 0) bits = rng();
      const bool swap = (bits >> (i % 64)) & 1;
      const auto& x = swap ? system[i] : baseline[i];
      const auto& y = swap ? baseline[i] : system[i];
      for (size_t k = 0; k < width; ++k) {
        a[k] += x[k];
        b[k] += y[k];
      }
    }
    diff.push_back(std::fabs(score(a) - score(b)));
  }
  r.p_value = p_value(diff, observed);
  if (options.ci_samples > 0) {
    const auto [bl, sys] =
        bootstrap_scores(baseline, system, options.ci_samples, options.seed + 1, score);
    r.baseline = estimate_interval(bl);
    r.system = estimate_interval(sys);
  }
  return r;
}

SegmentStats bleu_segment_stats(const Bleu& bleu, const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs) {
  const size_t order = static_cast<size_t>(bleu.options().max_ngram_order);
  SegmentStats out;
  out.reserve(hyps.size());
  for (const auto& st : bleu.sentence_stats(hyps, refs)) {
    std::vector<double> flat(2 + 2 * order, 0.0);
    flat[0] = st.sys_len;
    flat[1] = st.ref_len;
    for (size_t n = 0; n < order && n < st.correct.size(); ++n) flat[2 + n] = st.correct[n];
    for (size_t n = 0; n < order && n < st.total.size(); ++n) flat[2 + order + n] = st.total[n];
    out.push_back(std::move(flat));
  }
  return out;
}

ScoreFromStats bleu_scorer(const Bleu& bleu) {
  return [&bleu](const std::vector<double>& flat) {
    const size_t order = static_cast<size_t>(bleu.options().max_ngram_order);
    BleuStats st;
    st.sys_len = flat[0];
    st.ref_len = flat[1];
    st.correct.assign(flat.begin() + 2, flat.begin() + 2 + order);
    st.total.assign(flat.begin() + 2 + order, flat.begin() + 2 + 2 * order);
    return bleu.score_from_stats(st).score;
  };
}

SegmentStats chrf_segment_stats(const Chrf& chrf, const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs) {
  return chrf.sentence_stats(hyps, refs);
}

ScoreFromStats chrf_scorer(const Chrf& chrf) {
  return [&chrf](const std::vector<double>& flat) { return chrf.f_score(flat); };
}

PairedComparison paired_compare(const BleuOptions& metric, const std::vector<std::string>& baseline,
                                const std::vector<std::string>& system,
                                const std::vector<std::vector<std::string>>& refs,
                                const PairedTestOptions& options) {
  const Bleu bleu(metric);
  const auto sb = bleu_segment_stats(bleu, baseline, refs);
  const auto ss = bleu_segment_stats(bleu, system, refs);
  PairedComparison c;
  c.result = paired_test(sb, ss, bleu_scorer(bleu), options);
  c.name = "BLEU";
  c.signature = bleu.signature(bleu.last_nrefs());
  return c;
}

PairedComparison paired_compare(const ChrfOptions& metric, const std::vector<std::string>& baseline,
                                const std::vector<std::string>& system,
                                const std::vector<std::vector<std::string>>& refs,
                                const PairedTestOptions& options) {
  const Chrf chrf(metric);
  const auto sb = chrf_segment_stats(chrf, baseline, refs);
  const auto ss = chrf_segment_stats(chrf, system, refs);
  PairedComparison c;
  c.result = paired_test(sb, ss, chrf_scorer(chrf), options);
  c.name = chrf.name();
  c.signature = chrf.signature(chrf.last_nrefs());
  return c;
}

}  // namespace headcount::eval
