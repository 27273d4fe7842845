#include "headcount/decode/search.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headcount/common/check.h"
#include "headcount/common/precision.h"
#include "headcount/data/vocab.h"

namespace headcount::decode {

SearchOptions SearchOptions::from(const DecodeConfig& c) {
  SearchOptions o;
  o.beam = c.beam;
  o.length_penalty = c.length_penalty;
  o.max_len_offset = c.max_len_offset;
  o.max_len_ratio = c.max_len_ratio;
  o.precision = c.precision;
  return o;
}

int64_t SearchOptions::max_length(int64_t source_length) const {
  return std::max<int64_t>(
      1, static_cast<int64_t>(max_len_offset + max_len_ratio * static_cast<double>(source_length)));
}

double length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Tokens that are never produced: padding and BOS.
void block_specials(torch::Tensor& lprobs) {
  lprobs.select(1, data::kPadId).fill_(kNegInf);
  lprobs.select(1, data::kBosId).fill_(kNegInf);
}

}  // namespace

std::vector<Hypothesis> greedy_search(StepModel& model, const std::vector<int64_t>& max_lens) {
  const int64_t B = static_cast<int64_t>(max_lens.size());
  std::vector<Hypothesis> out(B);
  // The model's rows are the sentences still running: a finished sentence's row is dropped
  // (model.reorder) instead of running on dummy input until the longest one ends.
  std::vector<int64_t> active(B);
  std::iota(active.begin(), active.end(), 0);
  // device: cpu (search bookkeeping stays on the host; the StepModel moves it to its device)
  auto last = torch::full({B}, data::kBosId, torch::kInt64);
  for (int64_t t = 0; !active.empty(); ++t) {
    auto lprobs = model.step(last).to(torch::kCPU).to(torch::kFloat32).contiguous();  // [A, V]
    block_specials(lprobs);
    auto lp = lprobs.accessor<float, 2>();
    std::vector<int64_t> keep_rows, still_active, next;
    for (int64_t r = 0; r < static_cast<int64_t>(active.size()); ++r) {
      const int64_t b = active[r];
      int64_t best = data::kEosId;
      if (t < max_lens[b]) {
        float best_lp = kNegInf;
        for (int64_t v = 0; v < lprobs.size(1); ++v) {
          if (lp[r][v] > best_lp) {
            best_lp = lp[r][v];
            best = v;
          }
        }
      }
      out[b].log_prob += lp[r][best];
      if (best == data::kEosId) {
        out[b].score = out[b].log_prob;
        continue;
      }
      out[b].tokens.push_back(best);
      keep_rows.push_back(r);
      still_active.push_back(b);
      next.push_back(best);
    }
    if (still_active.empty()) break;
    if (still_active.size() < active.size()) {
      model.reorder(torch::tensor(keep_rows, torch::kInt64));  // device: cpu (host row index)
    }
    active = std::move(still_active);
    last = torch::tensor(next, torch::kInt64);  // device: cpu (host bookkeeping, as above)
  }
  return out;
}

std::vector<Hypothesis> beam_search(StepModel& model, const std::vector<int64_t>& max_lens,
                                    int beam, double alpha) {
  HC_CHECK(beam >= 1, "beam size must be at least 1, got {}", beam);
  const int64_t B = static_cast<int64_t>(max_lens.size()), K = beam;
  std::vector<std::vector<Hypothesis>> finished(B);
  // The model's rows are the K beams of each sentence still running, row a * K + k for the
  // a-th of them; a finished sentence's rows are dropped at the next reorder. All beams start
  // equal; only beam 0 is live at first, so the K first continuations are distinct.
  std::vector<int64_t> active(B);
  std::iota(active.begin(), active.end(), 0);
  std::vector<double> scores(B * K, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t k = 1; k < K; ++k) scores[b * K + k] = -INFINITY;
  }
  std::vector<std::vector<int64_t>> tokens(B * K);
  // device: cpu (search bookkeeping stays on the host; the StepModel moves it to its device)
  auto last = torch::full({B * K}, data::kBosId, torch::kInt64);
  for (int64_t t = 0; !active.empty(); ++t) {
    const int64_t A = static_cast<int64_t>(active.size()), N = A * K;
    auto lprobs = model.step(last).to(torch::kCPU).to(torch::kFloat32).contiguous();  // [N, V]
    const int64_t V = lprobs.size(1);
    block_specials(lprobs);
    for (int64_t a = 0; a < A; ++a) {
      if (t >= max_lens[active[a]]) {
        // Out of length: only EOS remains.
        auto rows = lprobs.narrow(0, a * K, K);
        auto eos = rows.select(1, data::kEosId).clone();
        rows.fill_(kNegInf);
        rows.select(1, data::kEosId).copy_(eos);
      }
    }
    // device: cpu (added to lprobs, which were copied to the host above)
    auto base = torch::tensor(scores, torch::kFloat64).to(torch::kFloat32).view({N, 1});
    auto cand = (lprobs + base).view({A, K * V});                         // [A, K*V]
    auto [top_v, top_i] = cand.topk(std::min<int64_t>(2 * K, K * V), 1);  // [A, 2K]
    auto tv = top_v.accessor<float, 2>();
    auto ti = top_i.accessor<int64_t, 2>();
    std::vector<int64_t> still_active, source_rows, new_tokens;
    std::vector<double> new_scores;
    for (int64_t a = 0; a < A; ++a) {
      const int64_t b = active[a];
      int64_t kept = 0;
      std::vector<int64_t> rows(K, a * K), toks(K, data::kEosId);
      std::vector<double> vals(K, -INFINITY);
      for (int64_t r = 0; r < top_v.size(1) && kept < K; ++r) {
        const float value = tv[a][r];
        if (!std::isfinite(value)) break;
        const int64_t beam_idx = ti[a][r] / V, token = ti[a][r] % V;
        const int64_t row = a * K + beam_idx;
        if (token == data::kEosId) {
          // Only EOS among the K best candidates ends a hypothesis (fairseq's rule), so that
          // beam 1 is exactly greedy search.
          if (r < K) {
            Hypothesis h;
            h.tokens = tokens[row];
            h.log_prob = value;
            h.score = value / length_penalty(t + 1, alpha);
            finished[b].push_back(std::move(h));
          }
          continue;
        }
        rows[kept] = row;
        toks[kept] = token;
        vals[kept] = value;
        ++kept;
      }
      if (static_cast<int64_t>(finished[b].size()) >= K || t >= max_lens[b]) continue;
      // Unfilled beams run on dummy input with a score of -inf.
      still_active.push_back(b);
      source_rows.insert(source_rows.end(), rows.begin(), rows.end());
      new_tokens.insert(new_tokens.end(), toks.begin(), toks.end());
      new_scores.insert(new_scores.end(), vals.begin(), vals.end());
    }
    if (still_active.empty()) break;
    std::vector<std::vector<int64_t>> next_tokens(source_rows.size());
    for (size_t r = 0; r < source_rows.size(); ++r) {
      next_tokens[r] = tokens[source_rows[r]];
      if (std::isfinite(new_scores[r])) next_tokens[r].push_back(new_tokens[r]);
    }
    tokens = std::move(next_tokens);
    scores = std::move(new_scores);
    active = std::move(still_active);
    model.reorder(torch::tensor(source_rows, torch::kInt64));  // device: cpu (host row index)
    last = torch::tensor(new_tokens, torch::kInt64);           // device: cpu (host bookkeeping)
  }
  std::vector<Hypothesis> out(B);
  for (int64_t b = 0; b < B; ++b) {
    HC_CHECK(!finished[b].empty(), "beam search produced no hypothesis for sentence {}", b);
    out[b] = *std::max_element(
        finished[b].begin(), finished[b].end(),
        [](const Hypothesis& x, const Hypothesis& y) { return x.score < y.score; });
  }
  return out;
}

TransformerStepper::TransformerStepper(model::Transformer& model, const torch::Tensor& src,
                                       int64_t beam)
    : model_(model) {
  // A source built on the host is moved once: the encoder's embedding indexes on the model's
  // device.
  const auto tokens = src.to(model_->output_weight.device());  // [B, S]
  enc_ = model_->encode(tokens);
  if (beam > 1) {
    auto idx = torch::arange(tokens.size(0),
                             torch::TensorOptions().dtype(torch::kInt64).device(tokens.device()))
                   .repeat_interleave(beam);
    enc_.memory = enc_.memory.index_select(0, idx);
    enc_.bias = enc_.bias.index_select(0, idx);
    enc_.src_lengths = enc_.src_lengths.index_select(0, idx);
  }
  state_ = model_->start_state();
}

torch::Tensor TransformerStepper::step(const torch::Tensor& last_tokens) {
  // The search hands over host tensors: the embedding's index must be on the model's device.
  const auto tokens = last_tokens.to(enc_.memory.device()).view({-1, 1});  // [N, 1]
  auto logits = model_->decode(tokens, enc_, &state_);                     // [N, 1, V]
  return torch::log_softmax(logits.squeeze(1).to(torch::kFloat32), -1);    // [N, V]
}

void TransformerStepper::reorder(const torch::Tensor& index) {
  // Moved once: the cached keys and values, the memory and its bias all live on one device.
  const auto rows = index.to(enc_.memory.device());
  state_.reorder(rows);
  enc_.memory = enc_.memory.index_select(0, rows);
  enc_.bias = enc_.bias.index_select(0, rows);
  enc_.src_lengths = enc_.src_lengths.index_select(0, rows);
}

std::vector<std::vector<int64_t>> translate_ids(model::Transformer& model,
                                                const std::vector<std::vector<int>>& sources,
                                                const SearchOptions& options, int batch_size,
                                                const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  // One scope for every batch: autocast keeps its bf16 copies of the weights throughout.
  PrecisionScope scope(resolve_precision(options.precision, device, "decode.precision"), device);
  std::vector<int64_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<std::vector<int64_t>> out(sources.size());
  for (size_t start = 0; start < order.size(); start += batch_size) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size));
    size_t longest = 0;
    for (size_t i = start; i < end; ++i) longest = std::max(longest, sources[order[i]].size());
    // device: cpu (filled element by element on the host, then moved to `device` in one copy)
    auto src = torch::full({static_cast<int64_t>(end - start), static_cast<int64_t>(longest) + 1},
                           data::kPadId, torch::kInt64);
    std::vector<int64_t> max_lens;
    for (size_t i = start; i < end; ++i) {
      const auto& s = sources[order[i]];
      for (size_t k = 0; k < s.size(); ++k) src[i - start][k] = s[k];
      src[i - start][s.size()] = data::kEosId;
      max_lens.push_back(std::min<int64_t>(options.max_length(static_cast<int64_t>(s.size()) + 1),
                                           model->config().max_positions - 1));
    }
    src = src.to(device);
    TransformerStepper stepper(model, src, options.beam);
    const auto hyps = options.beam == 1
                          ? greedy_search(stepper, max_lens)
                          : beam_search(stepper, max_lens, options.beam, options.length_penalty);
    for (size_t i = start; i < end; ++i) out[order[i]] = hyps[i - start].tokens;
  }
  if (was_training) model->train();
  return out;
}

}  // namespace headcount::decode
