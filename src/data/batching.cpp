#include "headcount/data/batching.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "headcount/common/check.h"
#include "headcount/data/vocab.h"

namespace headcount::data {

std::vector<Example> encode_pairs(const ParallelText& text, const Vocab& src, const Vocab& tgt,
                                  int max_len, size_t* dropped) {
  std::vector<Example> out;
  out.reserve(text.size());
  size_t n_dropped = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    Example e;
    e.src = src.encode(text.src[i]);
    e.tgt = tgt.encode(text.tgt[i]);
    e.id = static_cast<int64_t>(i);
    if (static_cast<int>(e.src.size()) > max_len || static_cast<int>(e.tgt.size()) > max_len) {
      ++n_dropped;
      continue;
    }
    out.push_back(std::move(e));
  }
  if (dropped) *dropped = n_dropped;
  return out;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<Example>& examples,
                                               int64_t max_tokens, uint64_t seed) {
  std::vector<int64_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> tie(examples.size());
  for (auto& t : tie) t = rng();
  auto len = [&](int64_t i) {
    return std::max(examples[i].src.size(), examples[i].tgt.size()) + 1;  // + EOS / BOS
  };
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const auto la = len(a), lb = len(b);
    if (la != lb) return la < lb;
    const auto sa = examples[a].src.size(), sb = examples[b].src.size();
    if (sa != sb) return sa < sb;
    return tie[a] < tie[b];
  });
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> current;
  int64_t longest = 0;
  for (int64_t i : order) {
    const int64_t l = static_cast<int64_t>(len(i));
    HC_CHECK(l <= max_tokens,
             "a training pair of {} tokens does not fit train.max_tokens ({}): raise it or lower "
             "train.max_len",
             l, max_tokens);
    if (!current.empty() &&
        std::max(longest, l) * static_cast<int64_t>(current.size() + 1) > max_tokens) {
      batches.push_back(std::move(current));
      current.clear();
      longest = 0;
    }
    current.push_back(i);
    longest = std::max(longest, l);
  }
  if (!current.empty()) batches.push_back(std::move(current));
  return batches;
}

std::vector<int64_t> epoch_order(int64_t num_batches, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(num_batches);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(epoch) * 7919ULL + 17);
  // Fisher-Yates with our own draws: std::shuffle's use of the engine is not fixed by the
  // standard, this is (same order on every platform).
  for (int64_t i = num_batches - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

Batch collate(const std::vector<Example>& examples, const std::vector<int64_t>& indices,
              const torch::Device& device) {
  Batch b;
  const int64_t n = static_cast<int64_t>(indices.size());
  size_t max_src = 0, max_tgt = 0;
  for (int64_t i : indices) {
    max_src = std::max(max_src, examples[i].src.size());
    max_tgt = std::max(max_tgt, examples[i].tgt.size());
  }
  const int64_t S = static_cast<int64_t>(max_src) + 1, T = static_cast<int64_t>(max_tgt) + 1;
  auto src = torch::full({n, S}, kPadId, torch::kInt64);
  auto tin = torch::full({n, T}, kPadId, torch::kInt64);
  auto tout = torch::full({n, T}, kPadId, torch::kInt64);
  auto s = src.accessor<int64_t, 2>();
  auto ti = tin.accessor<int64_t, 2>();
  auto to = tout.accessor<int64_t, 2>();
  for (int64_t r = 0; r < n; ++r) {
    const Example& e = examples[indices[r]];
    for (size_t k = 0; k < e.src.size(); ++k) s[r][k] = e.src[k];
    s[r][e.src.size()] = kEosId;
    ti[r][0] = kBosId;
    for (size_t k = 0; k < e.tgt.size(); ++k) {
      ti[r][k + 1] = e.tgt[k];
      to[r][k] = e.tgt[k];
    }
    to[r][e.tgt.size()] = kEosId;
    b.src_tokens += static_cast<int64_t>(e.src.size()) + 1;
    b.tgt_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
    b.ids.push_back(e.id);
  }
  b.src = src.to(device);
  b.tgt_in = tin.to(device);
  b.tgt_out = tout.to(device);
  return b;
}

}  // namespace headcount::data
