#include "headcount/analysis/head_stats.h"

#include <torch/torch.h>
#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headcount/common/check.h"

namespace headcount::analysis {

void HeadStats::add(const torch::Tensor& weights, const SentenceKeys& keys) {
  HC_CHECK(weights.dim() == 2, "attention weights must be [queries, keys]");
  const auto w = weights.to(torch::kDouble).cpu().contiguous();  // read through an accessor
  const int64_t T = w.size(0), S = w.size(1);
  const auto a = w.accessor<double, 2>();
  // The sentence's rarest key (EOS excluded), when it is rare enough to count.
  int64_t rarest = -1;
  if (!keys.rank.empty()) {
    HC_CHECK(static_cast<int64_t>(keys.rank.size()) == S, "rank: one entry per key");
    for (int64_t j = 0; j < S; ++j) {
      if (j == keys.eos) continue;
      if (rarest < 0 || keys.rank[j] > keys.rank[rarest]) rarest = j;
    }
    if (rarest >= 0 && keys.rank[rarest] < keys.exclude_top) rarest = -1;
  }
  for (int64_t i = 0; i < T; ++i) {
    double best_non_eos = 0, best = -1, entropy = 0;
    int64_t arg = 0;
    for (int64_t j = 0; j < S; ++j) {
      const double p = a[i][j];
      if (j != keys.eos) best_non_eos = std::max(best_non_eos, p);
      if (p > best) best = p, arg = j;
      if (p > 0) entropy -= p * std::log(p);
    }
    tokens += 1;
    // A query that sees no key but EOS/BOS (causal: the first) has no confidence to count.
    const int64_t visible = keys.causal ? std::min(i + 1, S) : S;
    if (visible > (keys.eos >= 0 && keys.eos < visible ? 1 : 0)) {
      confidence_tokens += 1;
      max_weight_sum += best_non_eos;
    }
    entropy_sum += entropy;
    if (keys.eos >= 0) eos_sum += a[i][keys.eos];
    if (keys.self) {
      self_tokens += 1;
      if (i - 1 >= 0 && i - 1 < S) prev_sum += a[i][i - 1];
      if (i < S) same_sum += a[i][i];
      if (i + 1 < S) next_sum += a[i][i + 1];
      argmax_offsets[arg - i] += 1;
    }
    if (rarest >= 0 && rarest < visible) {
      rare_tokens += 1;
      if (arg == rarest) rare_hits += 1;
    }
  }
}

std::pair<int64_t, double> HeadStats::top_offset() const {
  double total = 0, best = -1;
  int64_t offset = 0;
  for (const auto& [o, n] : argmax_offsets) {
    total += n;
    if (n > best) best = n, offset = o;
  }
  return {offset, total > 0 ? best / total : 0.0};
}

namespace {
// sum over the last dim of p * log(p / m), with 0 log 0 = 0
torch::Tensor kl_rows(const torch::Tensor& p, const torch::Tensor& m) {
  auto ratio = torch::where(p > 0, p / m, torch::ones_like(p));
  return (p * torch::log(ratio)).sum(-1);
}
}  // namespace

HeadFunctions head_functions(const HeadStats& s, bool self_attention, bool syntactic) {
  HeadFunctions f;
  // METHODS.md section 5: at least 90% of the maxima at one fixed relative position, whichever
  // (in practice -1 or +1; 0, a head attending to its own token, counts too).
  f.positional = self_attention && s.positional();
  f.rare_token = s.rare_fraction() >= 0.5;
  f.syntactic = syntactic;
  return f;
}

std::string HeadFunctions::label() const {
  std::string out;
  auto add = [&](const char* name) { out += (out.empty() ? "" : "+") + std::string(name); };
  if (positional) add("positional");
  if (syntactic) add("syntactic");
  if (rare_token) add("rare-token");
  return out.empty() ? "none" : out;
}

double js_divergence(const torch::Tensor& p, const torch::Tensor& q) {
  HC_CHECK(p.sizes() == q.sizes(), "JS divergence: the two heads' weights differ in shape");
  const auto pd = p.to(torch::kDouble), qd = q.to(torch::kDouble);
  const auto m = 0.5 * (pd + qd);
  return (0.5 * kl_rows(pd, m) + 0.5 * kl_rows(qd, m)).sum().item<double>();
}

torch::Tensor pairwise_js(const torch::Tensor& heads) {
  HC_CHECK(heads.dim() == 3, "pairwise JS: heads must be [N, T, S]");
  const auto h = heads.to(torch::kDouble);
  const auto p = h.unsqueeze(1);  // [N, 1, T, S]
  const auto q = h.unsqueeze(0);  // [1, N, T, S]
  const auto m = 0.5 * (p + q);
  auto kl = [](const torch::Tensor& a, const torch::Tensor& mm) {
    auto ratio = torch::where(a > 0, a / mm, torch::ones_like(mm));
    return (a * torch::log(ratio)).sum(std::vector<int64_t>{-1, -2});
  };
  return 0.5 * kl(p.expand_as(m), m) + 0.5 * kl(q.expand_as(m), m);
}

torch::Tensor classical_mds(const torch::Tensor& distances, int64_t dims) {
  HC_CHECK(distances.dim() == 2 && distances.size(0) == distances.size(1),
           "MDS needs a square distance matrix");
  const int64_t n = distances.size(0);
  HC_CHECK(dims >= 1 && dims <= n, "MDS: {} dimensions for {} points", dims, n);
  const auto d = distances.to(torch::kDouble).cpu().contiguous();  // read through an accessor
  Eigen::MatrixXd D2(n, n);
  const auto a = d.accessor<double, 2>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) D2(i, j) = a[i][j] * a[i][j];
  const Eigen::MatrixXd J =
      Eigen::MatrixXd::Identity(n, n) - Eigen::MatrixXd::Constant(n, n, 1.0 / n);
  const Eigen::MatrixXd B = -0.5 * J * D2 * J;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(B);
  // Eigen sorts eigenvalues in increasing order: take them from the end.
  auto out = torch::zeros({n, dims}, torch::kDouble);  // device: cpu (filled from Eigen's result)
  auto o = out.accessor<double, 2>();
  for (int64_t k = 0; k < dims; ++k) {
    const int64_t col = n - 1 - k;
    const double lambda = std::max(0.0, eig.eigenvalues()(col));
    const double s = std::sqrt(lambda);
    for (int64_t i = 0; i < n; ++i) o[i][k] = eig.eigenvectors()(i, col) * s;
  }
  return out;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < idx.size();) {
      size_t j = i;
      while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = (i + j) / 2.0;
      i = j + 1;
    }
    return r;
  };
  const auto rx = ranks(x), ry = ranks(y);
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / n;
  const double my = std::accumulate(ry.begin(), ry.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

}  // namespace headcount::analysis
