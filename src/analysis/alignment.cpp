#include "headcount/analysis/alignment.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "headcount/common/check.h"

namespace headcount::analysis {

void AlignCounts::operator+=(const AlignCounts& o) {
  predicted += o.predicted;
  hit_possible += o.hit_possible;
  hit_sure += o.hit_sure;
  sure += o.sure;
}

GoldAlignment::GoldAlignment(const std::vector<data::WordLink>& links, int64_t n_tgt_words)
    : possible(n_tgt_words), sure(n_tgt_words) {
  for (const auto& l : links) {
    HC_CHECK(l.tgt >= 0 && l.tgt < n_tgt_words && l.src >= 0,
             "gold link {}-{} outside the sentence ({} target words)", l.src, l.tgt, n_tgt_words);
    possible[l.tgt].push_back(l.src);
    if (l.sure) {
      sure[l.tgt].push_back(l.src);
      ++sure_links;
    }
  }
}

AlignCounts score_alignment(const std::vector<int64_t>& predicted, const GoldAlignment& gold) {
  AlignCounts c;
  c.sure = static_cast<double>(gold.sure_links);
  const size_t n = std::min(predicted.size(), gold.possible.size());
  for (size_t t = 0; t < n; ++t) {
    if (!gold.linked(static_cast<int64_t>(t)) || predicted[t] < 0) continue;
    c.predicted += 1;
    auto has = [&](const std::vector<int32_t>& v) {
      return std::find(v.begin(), v.end(), predicted[t]) != v.end();
    };
    if (has(gold.possible[t])) c.hit_possible += 1;
    if (has(gold.sure[t])) c.hit_sure += 1;
  }
  return c;
}

void AlignBaseline::add(const GoldAlignment& gold, int64_t n_src_words) {
  if (n_src_words <= 0) return;
  const auto n_tgt = static_cast<int64_t>(gold.possible.size());
  auto clip = [&](int64_t s) { return std::clamp<int64_t>(s, 0, n_src_words - 1); };
  for (int64_t k = -max_offset; k <= max_offset; ++k) {
    std::vector<int64_t> p(n_tgt);
    for (int64_t t = 0; t < n_tgt; ++t) p[t] = clip(t + k);
    offset[k] += score_alignment(p, gold);
  }
  std::vector<int64_t> p(n_tgt);
  for (int64_t t = 0; t < n_tgt; ++t)
    p[t] = clip(static_cast<int64_t>(
        std::llround(static_cast<double>(t) * n_src_words / std::max<int64_t>(1, n_tgt))));
  diagonal += score_alignment(p, gold);
}

std::pair<std::string, AlignCounts> AlignBaseline::best() const {
  std::pair<std::string, AlignCounts> b{"diagonal", diagonal};
  for (const auto& [k, c] : offset)
    if (c.precision() > b.second.precision()) b = {fmt::format("offset {:+d}", k), c};
  return b;
}

torch::Tensor cross_word_attention(const torch::Tensor& w, const std::vector<int64_t>& tgt_word,
                                   int64_t n_tgt, const std::vector<int64_t>& src_word,
                                   int64_t n_src) {
  const int64_t Q = w.size(-2), K = w.size(-1);
  HC_CHECK(static_cast<int64_t>(tgt_word.size()) == Q && static_cast<int64_t>(src_word.size()) == K,
           "cross_word_attention: {} x {} weights for {} target and {} source pieces", Q, K,
           tgt_word.size(), src_word.size());
  // Both maps are built entry by entry on the host, and the weights are copied there.
  // device: cpu (host map: mean over a word's pieces)
  auto rows = torch::zeros({n_tgt, Q}, torch::kDouble);
  std::vector<double> pieces(n_tgt, 0);
  for (int64_t q = 0; q < Q; ++q)
    if (tgt_word[q] >= 0) pieces[tgt_word[q]] += 1;
  for (int64_t q = 0; q < Q; ++q)
    if (tgt_word[q] >= 0) rows[tgt_word[q]][q] = 1.0 / pieces[tgt_word[q]];
  auto cols = torch::zeros({K, n_src}, torch::kDouble);  // device: cpu (host map: word sum)
  for (int64_t k = 0; k < K; ++k)
    if (src_word[k] >= 0) cols[k][src_word[k]] = 1.0;
  return torch::matmul(torch::matmul(rows, w.to(torch::kDouble).cpu()), cols);
}

torch::Tensor align_argmax(const torch::Tensor& word_w) {
  const auto [best, idx] = word_w.max(-1);
  return torch::where(best > 0, idx, torch::full_like(idx, -1));
}

}  // namespace headcount::analysis
