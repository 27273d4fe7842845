// Greedy and beam search on hand-made distributions and on a real (random) Transformer.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/model/transformer.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using data::kEosId;
constexpr int64_t kA = 4, kB = 5, kV = 6;

// Next-token distributions looked up by the prefix produced so far.
class TableModel : public decode::StepModel {
 public:
  explicit TableModel(int64_t rows) : history_(rows) {}
  std::map<std::vector<int64_t>, std::map<int64_t, double>> table;

  torch::Tensor step(const torch::Tensor& last) override {
    const int64_t n = last.size(0);
    auto out = torch::full({n, kV}, -INFINITY);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t tok = last[r].item<int64_t>();
      if (tok != data::kBosId) history_[r].push_back(tok);
      const auto it = table.find(history_[r]);
      if (it == table.end()) {
        out[r][kEosId] = 0.0;  // unknown prefix: end
        continue;
      }
      for (const auto& [t, p] : it->second) out[r][t] = std::log(p);
    }
    ++steps_;
    return out;
  }
  void reorder(const torch::Tensor& index) override {
    std::vector<std::vector<int64_t>> h;
    for (int64_t i = 0; i < index.size(0); ++i) h.push_back(history_[index[i].item<int64_t>()]);
    history_ = h;
  }
  int steps_ = 0;

 private:
  std::vector<std::vector<int64_t>> history_;
};

void fill_table(TableModel& m) {
  m.table[{}] = {{kA, 0.6}, {kB, 0.4}};
  m.table[{kA}] = {{kEosId, 0.3}, {kA, 0.36}, {kB, 0.34}};
  m.table[{kB}] = {{kEosId, 0.9}, {kA, 0.05}, {kB, 0.05}};
  m.table[{kA, kA}] = {{kEosId, 1.0}};
  m.table[{kA, kB}] = {{kEosId, 1.0}};
}

TEST(Search, BeamFindsAHigherScoringOutputThanGreedy) {
  TableModel g(1);
  fill_table(g);
  const auto greedy = decode::greedy_search(g, {10});
  // Greedy: a (0.6), then a (0.36), then EOS: p = 0.216.
  EXPECT_EQ(greedy[0].tokens, (std::vector<int64_t>{kA, kA}));
  EXPECT_NEAR(greedy[0].log_prob, std::log(0.6 * 0.36 * 1.0), 1e-6);
  TableModel b(2);
  fill_table(b);
  const auto beam = decode::beam_search(b, {10}, 2, 0.0);
  // Beam 2 keeps "b" alive and finds "b EOS": p = 0.36 > 0.216.
  EXPECT_EQ(beam[0].tokens, (std::vector<int64_t>{kB}));
  EXPECT_NEAR(beam[0].log_prob, std::log(0.4 * 0.9), 1e-6);
  EXPECT_GT(beam[0].log_prob, greedy[0].log_prob);
}

TEST(Search, BeamOneIsGreedyAndLengthIsCapped) {
  TableModel g(1), b(1);
  fill_table(g);
  fill_table(b);
  EXPECT_EQ(decode::beam_search(b, {10}, 1, 0.6)[0].tokens,
            decode::greedy_search(g, {10})[0].tokens);
  // At most one token before EOS is forced.
  TableModel g1(1), b1(3);
  fill_table(g1);
  fill_table(b1);
  EXPECT_EQ(decode::greedy_search(g1, {1})[0].tokens, (std::vector<int64_t>{kA}));
  const auto capped = decode::beam_search(b1, {1}, 3, 0.0);
  EXPECT_LE(capped[0].tokens.size(), 1u);
  EXPECT_EQ(capped[0].tokens, (std::vector<int64_t>{kB}));  // b EOS (0.36) beats a EOS (0.18)
}

TEST(Search, GnmtLengthPenaltyChangesTheWinner) {
  EXPECT_DOUBLE_EQ(decode::length_penalty(7, 0.6), std::pow(12.0 / 6.0, 0.6));
  EXPECT_DOUBLE_EQ(decode::length_penalty(3, 0.0), 1.0);
  // Short: p = 0.5 (1 token + EOS); long: p = 0.45 (3 tokens + EOS).
  auto make = [](int64_t rows) {
    TableModel m(rows);
    m.table[{}] = {{kA, 0.5}, {kB, 0.5}};
    m.table[{kA}] = {{kEosId, 1.0}};
    m.table[{kB}] = {{kB, 0.9}, {kEosId, 0.1}};
    m.table[{kB, kB}] = {{kB, 1.0}};
    m.table[{kB, kB, kB}] = {{kEosId, 1.0}};
    return m;
  };
  auto m0 = make(2);
  EXPECT_EQ(decode::beam_search(m0, {10}, 2, 0.0)[0].tokens, (std::vector<int64_t>{kA}));
  // log(0.45) / ((5+4)/6)^2 = -0.355 beats log(0.5) / ((5+2)/6)^2 = -0.509.
  auto m2 = make(2);
  EXPECT_EQ(decode::beam_search(m2, {10}, 2, 2.0)[0].tokens, (std::vector<int64_t>{kB, kB, kB}));
}

TEST(Search, BeamOneEqualsGreedyOnATransformerBatch) {
  torch::manual_seed(5);
  const ModelConfig c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 30, 30);
  m->eval();
  torch::NoGradGuard g;
  auto src = torch::randint(4, 30, {4, 6});
  src[2][5] = data::kPadId;
  std::vector<int64_t> max_lens = {8, 8, 5, 8};
  decode::TransformerStepper s1(m, src, 1), s2(m, src, 1);
  const auto greedy = decode::greedy_search(s1, max_lens);
  const auto beam = decode::beam_search(s2, max_lens, 1, 0.6);
  for (size_t i = 0; i < greedy.size(); ++i) {
    EXPECT_EQ(greedy[i].tokens, beam[i].tokens) << i;
    EXPECT_NEAR(greedy[i].log_prob, beam[i].log_prob, 1e-4);
    EXPECT_LE(static_cast<int64_t>(greedy[i].tokens.size()), max_lens[i]);
  }
}

// Counts the rows the search asks the model for at each step, and makes EOS less likely (a
// random model tends to end at once).
class RowCounter : public decode::StepModel {
 public:
  explicit RowCounter(decode::StepModel& inner) : inner_(inner) {}
  torch::Tensor step(const torch::Tensor& last) override {
    rows.push_back(last.size(0));
    auto lprobs = inner_.step(last);
    lprobs.select(1, kEosId).sub_(4.0);
    return lprobs;
  }
  void reorder(const torch::Tensor& index) override { inner_.reorder(index); }
  std::vector<int64_t> rows;

 private:
  decode::StepModel& inner_;
};

TEST(Search, FinishedSentencesLeaveTheBatchWithoutChangingTheOutput) {
  torch::manual_seed(7);
  const ModelConfig c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 30, 30);
  m->eval();
  torch::NoGradGuard g;
  auto src = torch::randint(4, 30, {4, 6});
  const std::vector<int64_t> max_lens = {1, 9, 3, 6};
  for (int beam : {1, 3}) {
    auto search = [&](decode::StepModel& model, const std::vector<int64_t>& lens) {
      return beam == 1 ? decode::greedy_search(model, lens)
                       : decode::beam_search(model, lens, beam, 0.6);
    };
    decode::TransformerStepper stepper(m, src, beam);
    RowCounter counted(stepper);
    const auto batch = search(counted, max_lens);
    // The rows start at batch x beam, never grow, and shrink once sentence 0 (at most one token)
    // has ended.
    ASSERT_GE(counted.rows.size(), 3u);
    EXPECT_EQ(counted.rows.front(), 4 * beam);
    EXPECT_TRUE(std::is_sorted(counted.rows.rbegin(), counted.rows.rend()));
    EXPECT_LT(counted.rows[2], 4 * beam);
    // Each sentence decoded alone gives the same output.
    for (int64_t i = 0; i < 4; ++i) {
      decode::TransformerStepper stepper_alone(m, src.narrow(0, i, 1), beam);
      RowCounter alone(stepper_alone);
      const auto one = search(alone, {max_lens[i]});
      EXPECT_EQ(one[0].tokens, batch[i].tokens) << "beam " << beam << ", sentence " << i;
      EXPECT_NEAR(one[0].log_prob, batch[i].log_prob, 1e-4) << "beam " << beam;
    }
  }
}

}  // namespace
}  // namespace headcount
