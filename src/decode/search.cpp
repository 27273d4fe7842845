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

namespace {

// The beams of the sentences still running: the model's rows are the K beams of each, row
// a * K + k for the a-th of them.
struct BeamState {
  std::vector<int64_t> active;               // sentence of each group of K rows
  std::vector<double> scores;                // [A*K] summed log-probabilities
  std::vector<std::vector<int64_t>> tokens;  // [A*K] outputs so far
};

// All beams start equal; only beam 0 is live at first, so the K first continuations are
// distinct.
BeamState initial_beams(int64_t B, int64_t K) {
  BeamState s;
  s.active.resize(B);
  std::iota(s.active.begin(), s.active.end(), 0);
  s.scores.assign(B * K, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t k = 1; k < K; ++k) s.scores[b * K + k] = -INFINITY;
  }
  s.tokens.resize(B * K);
  return s;
}

// Rows of sentences out of length: only EOS remains.
void force_eos_past_length(torch::Tensor& lprobs, const std::vector<int64_t>& active,
                           const std::vector<int64_t>& max_lens, int64_t t, int64_t K) {
  for (int64_t a = 0; a < static_cast<int64_t>(active.size()); ++a) {
    if (t >= max_lens[active[a]]) {
      auto rows = lprobs.narrow(0, a * K, K);
      auto eos = rows.select(1, data::kEosId).clone();
      rows.fill_(kNegInf);
      rows.select(1, data::kEosId).copy_(eos);
    }
  }
}

// What one step keeps: the sentences still running and, for each of their K new beams, the row it
// continues, its new token and its score.
struct StepChoice {
  std::vector<int64_t> active, source_rows, tokens;
  std::vector<double> scores;
};

// Sentence `a`'s candidates (its row of the top 2K): the K best that do not end continue,
// unfilled beams on dummy input with a score of -inf; EOS among the K best ends a hypothesis
// (fairseq's rule), so that beam 1 is exactly greedy search.
void continue_sentence(int64_t a, const torch::Tensor& top_v, const torch::Tensor& top_i, int64_t V,
                       int64_t t, int64_t K, double alpha, const BeamState& s,
                       const std::vector<int64_t>& max_lens,
                       std::vector<std::vector<Hypothesis>>& finished, StepChoice& c) {
  const auto tv = top_v.accessor<float, 2>();
  const auto ti = top_i.accessor<int64_t, 2>();
  const int64_t b = s.active[a];
  int64_t kept = 0;
  std::vector<int64_t> rows(K, a * K), toks(K, data::kEosId);
  std::vector<double> vals(K, -INFINITY);
  for (int64_t r = 0; r < top_v.size(1) && kept < K; ++r) {
    const float value = tv[a][r];
    if (!std::isfinite(value)) break;
    const int64_t beam_idx = ti[a][r] / V, token = ti[a][r] % V;
    const int64_t row = a * K + beam_idx;
    if (token == data::kEosId) {
      if (r < K) {
        Hypothesis h;
        h.tokens = s.tokens[row];
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
  if (static_cast<int64_t>(finished[b].size()) >= K || t >= max_lens[b]) return;
  c.active.push_back(b);
  c.source_rows.insert(c.source_rows.end(), rows.begin(), rows.end());
  c.tokens.insert(c.tokens.end(), toks.begin(), toks.end());
  c.scores.insert(c.scores.end(), vals.begin(), vals.end());
}

// The top 2K of each sentence's K x V continuations, split into ended and continuing ones.
StepChoice choose_continuations(const BeamState& s, const torch::Tensor& lprobs,
                                const std::vector<int64_t>& max_lens, int64_t t, int64_t K,
                                double alpha, std::vector<std::vector<Hypothesis>>& finished) {
  const int64_t A = static_cast<int64_t>(s.active.size()), N = A * K, V = lprobs.size(1);
  // device: cpu (added to lprobs, which were copied to the host)
  auto base = torch::tensor(s.scores, torch::kFloat64).to(torch::kFloat32).view({N, 1});
  auto cand = (lprobs + base).view({A, K * V});                         // [A, K*V]
  auto [top_v, top_i] = cand.topk(std::min<int64_t>(2 * K, K * V), 1);  // [A, 2K]
  StepChoice c;
  for (int64_t a = 0; a < A; ++a)
    continue_sentence(a, top_v, top_i, V, t, K, alpha, s, max_lens, finished, c);
  return c;
}

// The beams after a step: each continues its source row's tokens (a dummy beam adds none).
BeamState next_beams(const BeamState& s, StepChoice& c) {
  BeamState n;
  n.tokens.resize(c.source_rows.size());
  for (size_t r = 0; r < c.source_rows.size(); ++r) {
    n.tokens[r] = s.tokens[c.source_rows[r]];
    if (std::isfinite(c.scores[r])) n.tokens[r].push_back(c.tokens[r]);
  }
  n.scores = std::move(c.scores);
  n.active = std::move(c.active);
  return n;
}

// The best-scoring finished hypothesis of each sentence.
std::vector<Hypothesis> best_hypotheses(const std::vector<std::vector<Hypothesis>>& finished) {
  std::vector<Hypothesis> out(finished.size());
  for (size_t b = 0; b < finished.size(); ++b) {
    HC_CHECK(!finished[b].empty(), "beam search produced no hypothesis for sentence {}", b);
    out[b] = *std::max_element(
        finished[b].begin(), finished[b].end(),
        [](const Hypothesis& x, const Hypothesis& y) { return x.score < y.score; });
  }
  return out;
}

}  // namespace

std::vector<Hypothesis> beam_search(StepModel& model, const std::vector<int64_t>& max_lens,
                                    int beam, double alpha) {
  HC_CHECK(beam >= 1, "beam size must be at least 1, got {}", beam);
  const int64_t B = static_cast<int64_t>(max_lens.size()), K = beam;
  std::vector<std::vector<Hypothesis>> finished(B);
  // A finished sentence's rows are dropped at the next reorder.
  BeamState s = initial_beams(B, K);
  // device: cpu (search bookkeeping stays on the host; the StepModel moves it to its device)
  auto last = torch::full({B * K}, data::kBosId, torch::kInt64);
  for (int64_t t = 0; !s.active.empty(); ++t) {
    auto lprobs = model.step(last).to(torch::kCPU).to(torch::kFloat32).contiguous();  // [N, V]
    block_specials(lprobs);
    force_eos_past_length(lprobs, s.active, max_lens, t, K);
    StepChoice c = choose_continuations(s, lprobs, max_lens, t, K, alpha, finished);
    if (c.active.empty()) break;
    s = next_beams(s, c);  // moves the scores and sentences out of c; rows and tokens stay
    model.reorder(torch::tensor(c.source_rows, torch::kInt64));  // device: cpu (host row index)
    last = torch::tensor(c.tokens, torch::kInt64);               // device: cpu (host bookkeeping)
  }
  return best_hypotheses(finished);
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
