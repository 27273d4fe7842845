// Gated models and their physically pruned counterparts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>

#include "headcount/common/check.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/prune/head_gates.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using model::AttentionType;

TEST(PruneHeads, PrunedModelComputesWhatTheGatedModelDoes) {
  torch::manual_seed(7);
  auto c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 30, 30);
  m->eval();
  const std::vector<AttentionType> all = {AttentionType::kEncSelf, AttentionType::kDecSelf,
                                          AttentionType::kEncDec};
  prune::HeadGates gates(m, all, prune::HardConcreteOptions{});
  {
    torch::NoGradGuard g;
    // Closed, fractional and open gates; encoder layer 1 loses every head, and so does decoder
    // layer 0's encoder-decoder attention.
    const std::vector<std::vector<float>> la = {{-5, 0.3f, 5, -0.2f}, {-4, -4, -4, -4},
                                                {5, 5, -3, 1.0f},     {0.0f, -9, 4, 4},
                                                {-3, -3, -3, -3},     {2.0f, -1, -8, 6}};
    for (size_t i = 0; i < gates->layers().size(); ++i)
      gates->layers()[i].gate->log_alpha.copy_(torch::tensor(la[i]));
  }
  gates->apply_eval();
  auto src = torch::randint(4, 30, {3, 7});
  src[1][6] = data::kPadId;
  auto tgt = torch::randint(4, 30, {3, 5});
  torch::NoGradGuard ng;
  const auto gated = m->forward(src, tgt);
  const auto values = gates->eval_values();
  auto pruned = prune::prune_heads(m, values);
  pruned->eval();
  EXPECT_EQ(pruned->architecture().enc_self, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(pruned->architecture().dec_self, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(pruned->architecture().enc_dec, (std::vector<int64_t>{0, 3}));
  const auto small = pruned->forward(src, tgt);
  EXPECT_TRUE(torch::allclose(gated, small, 1e-5, 1e-5)) << (gated - small).abs().max();
  // Same beam-search output.
  std::vector<std::vector<int>> sentences = {{5, 6, 7, 8}, {9, 10}, {11, 12, 13, 14, 15, 16}};
  decode::SearchOptions o;
  o.beam = 3;
  EXPECT_EQ(decode::translate_ids(m, sentences, o, 2, torch::kCPU),
            decode::translate_ids(pruned, sentences, o, 2, torch::kCPU));
  // Fewer parameters, and no zero-width weights.
  int64_t before = 0, after = 0;
  for (const auto& p : m->parameters()) before += p.numel();
  for (const auto& p : pruned->parameters()) {
    after += p.numel();
    EXPECT_GT(p.numel(), 0);
  }
  EXPECT_LT(after, before);
  // 12 heads removed, each with 3 x 8 rows of W_qkv (+ biases) and 8 columns of W_o (d = 32).
  EXPECT_EQ(before - after, 12 * (4 * 8 * 32 + 3 * 8));
}

TEST(PruneHeads, TopNKeepsExactlyNHeads) {
  torch::manual_seed(8);
  auto c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 30, 30);
  const std::vector<AttentionType> enc = {AttentionType::kEncSelf};
  prune::HeadGates gates(m, enc, prune::HardConcreteOptions{});
  {
    torch::NoGradGuard g;
    gates->layers()[0].gate->log_alpha.copy_(torch::tensor({1.0f, -5.0f, 0.5f, 3.0f}));
    gates->layers()[1].gate->log_alpha.copy_(torch::tensor({-6.0f, 2.0f, -7.0f, 0.0f}));
  }
  const auto v = prune::top_n_values(*gates, 3);
  // The three largest log_alpha: 3.0 (layer 0 head 3), 2.0 (layer 1 head 1), 1.0 (layer 0 head 0).
  EXPECT_EQ(v.at("enc_self.0").gt(0).sum().item<int64_t>(), 2);
  EXPECT_EQ(v.at("enc_self.1").gt(0).sum().item<int64_t>(), 1);
  EXPECT_EQ(v.at("enc_self.0")[3].item<float>(), 1.0f);
  EXPECT_GT(v.at("enc_self.1")[1].item<float>(), 0.0f);
  EXPECT_THROW(prune::top_n_values(*gates, 9), Error);
  // Six heads: five have open gates; the sixth, closed (log_alpha -5, layer 0 head 1), is kept at
  // its expected gate, not at 1 (the model learned to do without it) and not at 0 (removed).
  const auto six = prune::top_n_values(*gates, 6);
  EXPECT_EQ(six.at("enc_self.0").gt(0).sum().item<int64_t>() +
                six.at("enc_self.1").gt(0).sum().item<int64_t>(),
            6);
  const auto expected = gates->layers()[0].gate->expected_gate();
  EXPECT_EQ(gates->layers()[0].gate->eval_gate()[1].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(six.at("enc_self.0")[1].item<float>(), expected[1].item<float>());
  EXPECT_GT(six.at("enc_self.0")[1].item<float>(), 0.0f);
  EXPECT_LT(six.at("enc_self.0")[1].item<float>(), 0.01f);
  EXPECT_EQ(six.at("enc_self.1")[0].item<float>(), 0.0f);  // log_alpha -6: the seventh
}

// prune.target_heads_per_type: each type keeps its own count, its heads with the largest log_alpha
// (chosen within the type, whatever the other types' log_alpha), the other types' layers
// untouched by its choice.
TEST(PruneHeads, PerTypeTargetKeepsEachTypesCountByLogAlphaWithinTheType) {
  torch::manual_seed(9);
  auto c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 30, 30);
  PruneConfig p;
  p.attention = {"enc_self", "dec_self", "enc_dec"};
  p.target_heads_per_type = {1, 2, 3};
  prune::HeadGates gates(m, prune::gated_types(p), prune::HardConcreteOptions{});
  ASSERT_EQ(gates->layers().size(), 6u);
  {
    torch::NoGradGuard g;
    // enc_self: every head far above the other types'; dec_self: the lowest; enc_dec between.
    const float base[] = {10.0f, -10.0f, 0.0f};
    for (auto& l : gates->layers()) {
      const int t = static_cast<int>(l.type);
      l.gate->log_alpha.copy_(torch::tensor({0.1f, 0.2f, 0.3f, 0.4f}) + (l.layer + base[t]));
    }
  }
  const auto groups = prune::target_groups(p);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[1].name, "dec_self");
  EXPECT_EQ(groups[1].heads, 2);
  const auto v = prune::final_values(*gates, p);
  ASSERT_EQ(v.size(), 6u);
  auto kept = [&](const char* key) { return v.at(key).gt(0).nonzero().view(-1); };
  // Per type, the largest log_alpha are layer 1's heads 3, 2, 1 (1.4, 1.3, 1.2 above the base).
  EXPECT_TRUE(torch::equal(kept("enc_self.1"), torch::tensor({3}, torch::kLong)));
  EXPECT_EQ(v.at("enc_self.0").gt(0).sum().item<int64_t>(), 0);
  EXPECT_TRUE(torch::equal(kept("dec_self.1"), torch::tensor({2, 3}, torch::kLong)));
  EXPECT_EQ(v.at("dec_self.0").gt(0).sum().item<int64_t>(), 0);
  EXPECT_TRUE(torch::equal(kept("enc_dec.1"), torch::tensor({1, 2, 3}, torch::kLong)));
  // dec_self's heads are closed (log_alpha -8.x): kept at their expected gate, small and positive.
  EXPECT_LT(v.at("dec_self.1")[3].item<float>(), 0.01f);
  // One total of 6 instead would take enc_self's top six heads and nothing else.
  PruneConfig one = p;
  one.target_heads_per_type.clear();
  one.target_heads = 6;
  const auto w = prune::final_values(*gates, one);
  EXPECT_EQ(w.at("enc_self.0").gt(0).sum().item<int64_t>() +
                w.at("enc_self.1").gt(0).sum().item<int64_t>(),
            6);
  // An ungated type has no group (its entry is the model's count, checked by the run).
  PruneConfig enc = p;
  enc.attention = {"enc_self"};
  ASSERT_EQ(prune::target_groups(enc).size(), 1u);
  EXPECT_EQ(prune::target_groups(enc)[0].types,
            std::vector<AttentionType>{AttentionType::kEncSelf});
  EXPECT_TRUE(prune::target_groups(PruneConfig{}).empty());  // lambda mode
}

// The probability that a Hard-Concrete gate is open, by formula (METHODS.md section 1, the
// default gate: beta 0.33, stretch [-0.1, 1.1]): sigmoid(log_alpha - beta log(-l / r)).
double p_open_by_formula(double log_alpha) {
  return 1.0 / (1.0 + std::exp(-(log_alpha - 0.33 * std::log(0.1 / 1.1))));
}

// prune.target_split expected: one total split between groups in proportion to their expected
// open heads, by largest remainder, with quotas capped at a group's size. The figures by hand.
TEST(PruneHeads, SplitByExpectedRoundsEachGroupsShareByLargestRemainder) {
  using prune::split_by_expected;
  const std::vector<int64_t> k48 = {48, 48, 48};
  // 72 x (7.41, 29.29, 35.26) / 71.96 = 7.414, 29.306, 35.280: floors 7 + 29 + 35 = 71, the one
  // head left to the largest fractional part (0.414).
  EXPECT_EQ(split_by_expected({7.41, 29.29, 35.26}, k48, 72), (std::vector<int64_t>{8, 29, 35}));
  // 72 x (6.60, 29.35, 35.92) / 71.87 = 6.612, 29.403, 35.985: floors 70, two heads left, to
  // 0.985 and 0.612.
  EXPECT_EQ(split_by_expected({6.60, 29.35, 35.92}, k48, 72), (std::vector<int64_t>{7, 29, 36}));
  // 12 x 8 / 10 = 9.6 exceeds the group's 8: it keeps all 8, the other two share 4 as 1 : 1.
  EXPECT_EQ(split_by_expected({8, 1, 1}, {8, 8, 8}, 12), (std::vector<int64_t>{8, 2, 2}));
  // Equal fractional parts: the earlier group first.
  EXPECT_EQ(split_by_expected({1, 1, 1}, {4, 4, 4}, 4), (std::vector<int64_t>{2, 1, 1}));
  // No expected heads anywhere: the sizes stand in (6 x 2/12, 6 x 4/12, 6 x 6/12).
  EXPECT_EQ(split_by_expected({0, 0, 0}, {2, 4, 6}, 6), (std::vector<int64_t>{1, 2, 3}));
  // The capped group full and nothing expected elsewhere: the count is made up one head a group.
  EXPECT_EQ(split_by_expected({5, 0, 0}, {4, 4, 4}, 6), (std::vector<int64_t>{4, 1, 1}));
  EXPECT_EQ(split_by_expected({3, 2}, {4, 4}, 0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(split_by_expected({3, 2}, {4, 4}, 8), (std::vector<int64_t>{4, 4}));
  // Over many draws: the counts add up to n, none exceeds its group, and without a cap each is
  // its quota rounded down or up.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.0, 48.0);
  for (int i = 0; i < 200; ++i) {
    const std::vector<double> e = {u(rng), u(rng), u(rng)};
    const int64_t n = static_cast<int64_t>(rng() % 145);
    const auto c = split_by_expected(e, k48, n);
    EXPECT_EQ(c[0] + c[1] + c[2], n);
    const double sum = e[0] + e[1] + e[2];
    bool cap = false;
    for (double x : e) cap = cap || n * x / sum > 48;
    for (int t = 0; t < 3; ++t) {
      EXPECT_LE(c[t], 48);
      if (!cap) {
        EXPECT_LT(std::abs(c[t] - n * e[t] / sum), 1.0) << i << " " << t;
      }
    }
  }
  EXPECT_NE(testing::error_of([] {
              split_by_expected({1, 1}, {2, 2}, 5);
            }).find("cannot keep 5 heads: the groups have 4"),
            std::string::npos);
}

// With one total over three types, the top rule and the expected split on the same gates: every
// enc_self head undecided (log_alpha 0, P_open 0.688), dec_self and enc_dec with four heads open
// (log_alpha 5) and four closed (-5) each. Keeping 8: the top rule takes the eight at 5 and no
// enc_self head; the expected split gives enc_self its share of E[open] = 5.50 + 4.00 + 4.00.
TEST(PruneHeads, ExpectedSplitKeepsEachTypesShareOfTheExpectedOpenHeads) {
  auto c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 30, 30);
  PruneConfig p;
  p.attention = {"enc_self", "dec_self", "enc_dec"};
  p.target_heads = 8;
  prune::HeadGates gates(m, prune::gated_types(p), prune::HardConcreteOptions{});
  ASSERT_EQ(gates->layers().size(), 6u);
  {
    torch::NoGradGuard g;
    for (auto& l : gates->layers()) {
      if (l.type == AttentionType::kEncSelf) {
        l.gate->log_alpha.fill_(0.0);
      } else {
        // Layer 0: heads 0-1 open, 2-3 closed; layer 1 the same, so each type has 4 open.
        l.gate->log_alpha.copy_(torch::tensor({5.0f, 5.0f, -5.0f, -5.0f}));
      }
    }
  }
  const double pe = p_open_by_formula(0.0), hi = p_open_by_formula(5.0),
               lo = p_open_by_formula(-5.0);
  const double e_enc = 8 * pe, e_other = 4 * hi + 4 * lo;
  EXPECT_NEAR(gates->expected_open({AttentionType::kEncSelf}).item<double>(), e_enc, 1e-4);
  // E[open] 8 x 0.688 = 5.50 and 4 x 0.997 + 4 x 0.015 = 4.05 (twice); quotas 8 x 5.50 / 13.60 =
  // 3.24 and 8 x 4.05 / 13.60 = 2.38: floors 3, 2, 2, the head left to dec_self (0.38, before
  // enc_dec's equal part).
  const double sum = e_enc + 2 * e_other;
  ASSERT_NEAR(8 * e_enc / sum, 3.24, 0.01);
  ASSERT_NEAR(8 * e_other / sum, 2.38, 0.01);
  const std::vector<AttentionType> all = {AttentionType::kEncSelf, AttentionType::kDecSelf,
                                          AttentionType::kEncDec};
  EXPECT_EQ(prune::expected_split(*gates, 8, all), (std::vector<int64_t>{3, 3, 2}));
  auto count = [](const std::map<std::string, torch::Tensor>& v, const char* type) {
    int64_t n = 0;
    for (const auto& [key, x] : v)
      if (key.rfind(type, 0) == 0) n += x.gt(0).sum().item<int64_t>();
    return n;
  };
  const auto top = prune::final_values(*gates, p);
  EXPECT_EQ(count(top, "enc_self"), 0);
  EXPECT_EQ(count(top, "dec_self"), 4);
  EXPECT_EQ(count(top, "enc_dec"), 4);
  p.target_split = TargetSplit::kExpected;
  const auto v = prune::final_values(*gates, p);
  EXPECT_EQ(count(v, "enc_self"), 3);
  EXPECT_EQ(count(v, "dec_self"), 3);
  EXPECT_EQ(count(v, "enc_dec"), 2);
  // Within a type the largest log_alpha: only heads at 5; enc_self's equal ones by position.
  for (const char* key : {"dec_self.0", "dec_self.1", "enc_dec.0", "enc_dec.1"})
    EXPECT_EQ(v.at(key).slice(0, 2, 4).gt(0).sum().item<int64_t>(), 0) << key;
  EXPECT_TRUE(torch::equal(v.at("enc_self.0").gt(0).nonzero().view(-1),
                           torch::tensor({0, 1, 2}, torch::kLong)));
  // Kept heads take their eval gate: 1 for log_alpha 5, min(1, max(0, sigmoid(0) 1.2 - 0.1)) =
  // 0.5 for the undecided enc_self heads (folded into W_o by the export, or 1 under prune.rewind).
  EXPECT_NEAR(v.at("enc_self.0")[0].item<float>(), 0.5f, 1e-6);
  EXPECT_EQ(v.at("dec_self.0")[0].item<float>(), 1.0f);
  // A count per type has no total to split: `expected` keeps what `top` keeps, per type the
  // largest log_alpha (enc_self's first two by position, the four open ones of each other type).
  p.target_heads = 0;
  p.target_heads_per_type = {2, 4, 4};
  const auto typed = prune::final_values(*gates, p);
  p.target_split = TargetSplit::kTop;
  const auto typed_top = prune::final_values(*gates, p);
  EXPECT_EQ(count(typed, "enc_self"), 2);
  EXPECT_EQ(count(typed, "dec_self"), 4);
  EXPECT_EQ(count(typed, "enc_dec"), 4);
  EXPECT_TRUE(torch::equal(typed.at("enc_self.0").gt(0).nonzero().view(-1),
                           torch::tensor({0, 1}, torch::kLong)));
  for (const char* key : {"dec_self.0", "dec_self.1", "enc_dec.0", "enc_dec.1"})
    EXPECT_EQ(typed.at(key).slice(0, 2, 4).gt(0).sum().item<int64_t>(), 0) << key;
  for (const auto& [key, x] : typed_top) EXPECT_TRUE(torch::equal(typed.at(key), x)) << key;
}

// prune.split_floor: heads below the floor count as closed when the total is split. enc_self has
// one head open (log_alpha 5) and seven nearly closed (-3, P_open 0.099 each, together 0.69);
// dec_self and enc_dec four open (5) and four closed (-5, P_open 0.015). Keeping 8 without a
// floor, enc_self's diffuse mass earns it a second head; with a floor of 0.15 it keeps one.
TEST(PruneHeads, SplitFloorLeavesNearlyClosedHeadsOutOfTheSplit) {
  auto c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 30, 30);
  PruneConfig p;
  p.attention = {"enc_self", "dec_self", "enc_dec"};
  p.target_heads = 8;
  p.target_split = TargetSplit::kExpected;
  prune::HeadGates gates(m, prune::gated_types(p), prune::HardConcreteOptions{});
  ASSERT_EQ(gates->layers().size(), 6u);
  {
    torch::NoGradGuard g;
    for (auto& l : gates->layers()) {
      if (l.type == AttentionType::kEncSelf)  // head 1 of layer 1 open, the other seven at -3
        l.gate->log_alpha.copy_(l.layer == 1 ? torch::tensor({-3.0f, 5.0f, -3.0f, -3.0f})
                                             : torch::tensor({-3.0f, -3.0f, -3.0f, -3.0f}));
      else
        l.gate->log_alpha.copy_(torch::tensor({5.0f, -5.0f, 5.0f, -5.0f}));
    }
  }
  const double hi = p_open_by_formula(5.0), mid = p_open_by_formula(-3.0),
               lo = p_open_by_formula(-5.0);
  ASSERT_NEAR(mid, 0.099, 0.001);
  ASSERT_NEAR(lo, 0.015, 0.001);
  const std::vector<AttentionType> all = {AttentionType::kEncSelf, AttentionType::kDecSelf,
                                          AttentionType::kEncDec};
  // No floor: E[open] 0.997 + 7 x 0.099 = 1.69 and 4 x 0.997 + 4 x 0.015 = 4.05 (twice); quotas
  // 8 x 1.69 / 9.78 = 1.38 and 3.31: floors 1, 3, 3, the last head to enc_self's 0.38.
  const double e_enc = hi + 7 * mid, e_other = 4 * hi + 4 * lo;
  EXPECT_NEAR(prune::counted_open(*gates, AttentionType::kEncSelf), e_enc, 1e-4);
  ASSERT_NEAR(8 * e_enc / (e_enc + 2 * e_other), 1.38, 0.01);
  EXPECT_EQ(prune::expected_split(*gates, 8, all), (std::vector<int64_t>{2, 3, 3}));
  // Floor 0.15: only P_open >= 0.15 counts, 0.997 and 4 x 0.997 (twice); quotas 8 x 0.997 /
  // 8.97 = 0.89 and 3.56: floors 0, 3, 3, the two heads left to 0.89 (enc_self) and the first
  // 0.56 (dec_self).
  EXPECT_NEAR(prune::counted_open(*gates, AttentionType::kEncSelf, 0.15), hi, 1e-4);
  EXPECT_NEAR(prune::counted_open(*gates, AttentionType::kDecSelf, 0.15), 4 * hi, 1e-4);
  ASSERT_NEAR(8 * hi / (9 * hi), 0.89, 0.01);
  EXPECT_EQ(prune::expected_split(*gates, 8, all, 0.15), (std::vector<int64_t>{1, 4, 3}));
  // A floor above every P_open leaves nothing to split by: the split without a floor.
  EXPECT_EQ(prune::expected_split(*gates, 8, all, 0.999), (std::vector<int64_t>{2, 3, 3}));
  auto count = [](const std::map<std::string, torch::Tensor>& v, const char* type) {
    int64_t n = 0;
    for (const auto& [key, x] : v)
      if (key.rfind(type, 0) == 0) n += x.gt(0).sum().item<int64_t>();
    return n;
  };
  p.split_floor = 0.15;
  const auto v = prune::final_values(*gates, p);
  EXPECT_EQ(count(v, "enc_self"), 1);
  EXPECT_EQ(count(v, "dec_self"), 4);
  EXPECT_EQ(count(v, "enc_dec"), 3);
  EXPECT_EQ(v.at("enc_self.1")[1].item<float>(), 1.0f);  // the open one
  p.split_floor = 0;
  EXPECT_EQ(count(prune::final_values(*gates, p), "enc_self"), 2);
}

}  // namespace
}  // namespace headcount

// ---------------------------------------------------------------------------------------------
// Whole pruning runs on the tiny synthetic corpus.

#include <sys/wait.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <tuple>

#include "headcount/common/io.h"
#include "headcount/common/precision.h"
#include "headcount/model/loss.h"
#include "headcount/prune/export.h"
#include "headcount/prune/prune_trainer.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/train/trainer.h"

namespace headcount {
namespace {

using testing::TempDir;

// A converged tiny baseline in dir/base, and a prune config starting from it.
Config baseline(const TempDir& dir) {
  Config c = tiny_run_config(dir, 8);
  c.model.d_model = 64;
  c.model.ffn_dim = 128;
  c.model.heads = 4;
  c.model.encoder_layers = 2;
  c.model.decoder_layers = 2;
  c.train.max_steps = 250;
  c.train.eval_every = 250;
  train::TrainOptions o;
  o.run_dir = dir / "base";
  train::train_command(c, o);
  c.prune.init_from = (dir / "base" / "checkpoints" / "last").string();
  c.train.max_steps = 60;
  c.train.eval_every = 20;
  c.train.lr = 1e-3;
  c.train.warmup_steps = 10;
  c.prune.gate_lr = 0.1;
  return c;
}

nlohmann::json pruning_summary(const fs::path& run) {
  return nlohmann::json::parse(io::read_file(run / "pruning.json"));
}

std::vector<nlohmann::json> events(const fs::path& run, const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& line : io::read_lines(run / "metrics.jsonl")) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == kind) out.push_back(j);
  }
  return out;
}

// The error of loading `c` as a YAML text named "bad" ("(no error)" when it loads).
std::string load_error(const Config& c) {
  return testing::error_of([&] {
    ConfigLoader l;
    l.apply_yaml_text(dump_config(c), "bad");
    l.finish();
  });
}

void run_prune(const Config& c, const fs::path& out) {
  train::TrainOptions o;
  o.run_dir = out;
  o.init_from = c.prune.init_from;
  prune::PruneTrainer(c, o).run();
}

TEST(PruneRun, LambdaZeroKeepsEveryHeadAndStartsFromTheBaseline) {
  TempDir dir;
  Config c = baseline(dir);
  c.prune.lambda = 0.0;
  run_prune(c, dir / "p0");
  const auto s = pruning_summary(dir / "p0");
  EXPECT_EQ(s["heads_after_e_d_de"], "8/8/8");
  // Step 0: gates fully open, the converged model unchanged: its dev BLEU is the baseline's.
  const auto base_eval = events(dir / "base", "eval").back();
  const auto first = events(dir / "p0", "eval").front();
  EXPECT_EQ(first["step"], 0);
  EXPECT_DOUBLE_EQ(first["dev_bleu"].get<double>(), base_eval["dev_bleu"].get<double>());
  EXPECT_DOUBLE_EQ(first["dev_loss"].get<double>(), base_eval["dev_loss"].get<double>());
  // Every head has a row, none removed.
  const auto rows = io::read_lines(dir / "p0" / "head_removal.csv");
  ASSERT_EQ(rows.size(), 25u);
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_NE(rows[i].find(",,"), std::string::npos) << rows[i];
}

TEST(PruneRun, HugeLambdaRemovesEveryHeadAndTheModelStillWorks) {
  TempDir dir;
  Config c = baseline(dir);
  c.prune.lambda = 100.0;
  c.train.patience = 1;  // dev BLEU falls as heads go: pruning must not stop early on it
  run_prune(c, dir / "p");
  const auto s = pruning_summary(dir / "p");
  EXPECT_EQ(s["steps"], 60);
  EXPECT_EQ(s["heads_after_e_d_de"], "0/0/0");
  EXPECT_LT(s["parameters_after"].get<int64_t>(), s["parameters_before"].get<int64_t>());
  // The pruned checkpoint loads, decodes and can be trained further from scratch.
  const auto info = run::read_checkpoint_info(dir / "p" / "pruned");
  EXPECT_EQ(info.architecture.total(), 0);
  auto m = run::load_model(info, torch::kCPU);
  decode::SearchOptions so;
  so.beam = 2;
  const auto out = decode::translate_ids(m, {{5, 6, 7}}, so, 1, torch::kCPU);
  EXPECT_EQ(out.size(), 1u);
  Config scratch = c;
  scratch.train.max_steps = 3;
  scratch.train.eval_every = 3;
  train::TrainOptions o;
  o.run_dir = dir / "scratch";
  o.architecture_from = dir / "p" / "pruned";
  EXPECT_EQ(train::train_command(scratch, o).steps, 3);
  // Any checkpoint of the run exports to a pruned model.
  const auto arch = prune::export_pruned(dir / "p" / "checkpoints" / "last", dir / "exported");
  EXPECT_EQ(arch.total(), 0);
  EXPECT_THROW(prune::export_pruned(dir / "base" / "checkpoints" / "last", dir / "x"), Error);
  // Every head has a removal step.
  for (const auto& row : io::read_lines(dir / "p" / "head_removal.csv")) {
    EXPECT_EQ(row.find(",,"), std::string::npos) << row;
  }
}

TEST(PruneRun, TargetModeEndsWithExactlyTheRequestedHeads) {
  TempDir dir;
  Config c = baseline(dir);
  c.prune.target_heads = 5;
  c.prune.target_warmup_steps = 30;
  c.prune.lagrangian_lr = 0.5;
  run_prune(c, dir / "t");
  const auto info = run::read_checkpoint_info(dir / "t" / "pruned");
  EXPECT_EQ(info.architecture.total(), 5);
  // The log shows the expected count approaching the target.
  const auto evals = events(dir / "t", "eval");
  EXPECT_GT(evals.front()["expected_open"].get<double>(),
            evals.back()["expected_open"].get<double>());
  EXPECT_DOUBLE_EQ(evals.back()["target_now"].get<double>(), 5.0);
  // The run's mask on the unpruned baseline (export-pruned --heads-of): the heads the CSV gives a
  // removal step, read here by hand, and the architecture of the run's own export.
  std::set<std::string> removed;
  for (const auto& row : io::read_lines(dir / "t" / "head_removal.csv")) {
    std::vector<std::string> f;
    std::stringstream line(row);
    for (std::string x; std::getline(line, x, ',');) f.push_back(x);
    f.resize(4);  // a kept head's row ends after its empty fields
    if (f[0] != "attention" && !f[3].empty()) removed.insert(f[0] + f[1] + "." + f[2]);
  }
  EXPECT_EQ(removed.size(), 19u);
  std::set<std::string> read;
  for (const auto& h : prune::removed_heads_of(dir / "t"))
    read.insert(std::string(model::attention_name(h.type)) + std::to_string(h.layer) + "." +
                std::to_string(h.head));
  EXPECT_EQ(read, removed);
  const fs::path base = dir / "base" / "checkpoints" / "last";
  EXPECT_EQ(prune::export_with_mask_of(base, dir / "t", dir / "masked"), info.architecture);
  EXPECT_EQ(run::read_checkpoint_info(dir / "masked").architecture, info.architecture);
  // Head numbers mean the unpruned model's heads: a pruned checkpoint is refused.
  EXPECT_NE(testing::error_of([&] {
              prune::export_with_mask_of(dir / "t" / "pruned", dir / "t", dir / "x");
            }).find("is already pruned"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              prune::export_with_mask_of(base, dir / "base", dir / "x");
            }).find("no head_removal.csv"),
            std::string::npos);
}

// Target mode toward 5 heads (ramp 20) with the mask fixed at step 40 of 60 for 20 recovery
// steps, every evaluation's checkpoint kept (step-20, step-40, ...): the tests of recovery, rewind
// and freeze_until_fixed.
Config fixed_at_40(const TempDir& dir) {
  Config c = baseline(dir);
  c.prune.target_heads = 5;
  c.prune.target_warmup_steps = 20;
  c.prune.lagrangian_lr = 0.5;
  c.prune.recovery_steps = 20;
  c.train.keep_last = 10;
  c.train.save_every = 0;
  return c;
}

TEST(PruneRun, RecoveryTrainsTheWeightsUnderTheFixedFinalMask) {
  TempDir dir;
  Config c = fixed_at_40(dir);
  run_prune(c, dir / "r");
  // Exactly the target, the same mask in the export as in every evaluation of the recovery.
  const auto info = run::read_checkpoint_info(dir / "r" / "pruned");
  EXPECT_EQ(info.architecture.total(), 5);
  const auto snapshots = run::read_gates(dir / "r" / "gates.jsonl");
  std::vector<const run::GateSnapshot*> fixed;
  for (const auto& g : snapshots)
    if (g.step >= 40) fixed.push_back(&g);
  ASSERT_GE(fixed.size(), 2u);
  for (const auto* g : fixed) {
    ASSERT_EQ(g->heads.size(), fixed.front()->heads.size());
    int kept = 0;
    for (size_t h = 0; h < g->heads.size(); ++h) {
      // The gates did not move: neither their values nor their P_open.
      EXPECT_EQ(g->heads[h].gate, fixed.front()->heads[h].gate) << g->step;
      EXPECT_EQ(g->heads[h].p_open, fixed.front()->heads[h].p_open) << g->step;
      kept += g->heads[h].gate > 0;
    }
    EXPECT_EQ(kept, 5) << g->step;
  }
  for (const auto& e : events(dir / "r", "eval"))
    EXPECT_EQ(e.value("mask_fixed", false), e["step"].get<int64_t>() >= 40) << e.dump();
  // The weights kept training under the mask: the final model is not the one of step 40.
  const auto at_fix = run::load_model(
      run::read_checkpoint_info(dir / "r" / "checkpoints" / "step-40"), torch::kCPU);
  auto last =
      run::load_model(run::read_checkpoint_info(dir / "r" / "checkpoints" / "last"), torch::kCPU);
  EXPECT_FALSE(
      torch::equal(at_fix->encoder_layers[0]->fc1->weight, last->encoder_layers[0]->fc1->weight));
  // The export is the last weights under the fixed mask: scaling the last checkpoint's heads by
  // the mask the run logged gives the pruned model's logits.
  std::map<std::pair<int, int64_t>, torch::Tensor> scales;
  for (const auto& h : fixed.back()->heads) {
    auto& m = scales[{static_cast<int>(h.head.type), h.head.layer}];
    if (!m.defined())
      m = torch::ones({last->attention_layers(h.head.type)[h.head.layer]->num_heads()});
    m[h.head.head] = h.gate;
  }
  for (auto& [key, m] : scales)
    last->attention_layers(static_cast<model::AttentionType>(key.first))[key.second]
        ->set_head_scale(m);
  auto pruned = run::load_model(info, torch::kCPU);
  last->eval();
  pruned->eval();
  torch::NoGradGuard ng;
  const auto src = torch::randint(4, info.src_vocab_size, {3, 7});
  const auto tgt = torch::randint(4, info.tgt_vocab_size, {3, 5});
  EXPECT_TRUE(torch::allclose(last->forward(src, tgt), pruned->forward(src, tgt), 1e-5, 1e-5));
  // Recovery needs gated steps before it.
  Config bad = c;
  bad.prune.recovery_steps = 60;
  const std::string e = load_error(bad);
  EXPECT_NE(e.find("prune.recovery_steps (60, from bad"), std::string::npos) << e;
}

// Lambda mode with the recipe's rewind (variants.sh lrw-L-Bx): the mask fixed at
// train.max_steps - recovery_steps is the gates' eval values made 0/1 (a head kept at any
// strength is kept whole, as the rewound weights were trained with it), the weights there are
// prune.init_from's, and the export keeps exactly the heads the recovery trained.
TEST(PruneRun, LambdaModeRewindFixesTheEvalGatesAsAZeroOneMask) {
  TempDir dir;
  Config c = baseline(dir);
  c.prune.lambda = 0.5;
  c.prune.gate_lr = 0.3;        // a gate can close within the 40 gated steps
  c.prune.recovery_steps = 20;  // fixed at step 40 of 60
  c.prune.rewind = true;
  c.train.keep_last = 10;
  c.train.save_every = 0;
  run_prune(c, dir / "l");
  const auto snapshots = run::read_gates(dir / "l" / "gates.jsonl");
  const run::GateSnapshot* before = nullptr;  // the last snapshot of the gated steps
  int kept_at_fix = -1;
  for (const auto& g : snapshots) {
    if (g.step < 40) {
      before = &g;
      continue;
    }
    int kept = 0;
    for (const auto& h : g.heads) {
      EXPECT_TRUE(h.gate == 0.0 || h.gate == 1.0) << g.step << " " << h.gate;
      kept += h.gate == 1.0;
    }
    if (kept_at_fix < 0) kept_at_fix = kept;
    EXPECT_EQ(kept, kept_at_fix) << g.step;  // fixed: the same heads to the end
  }
  ASSERT_NE(before, nullptr);
  ASSERT_GT(kept_at_fix, 0);
  ASSERT_LT(kept_at_fix, 24) << "no head closed by step 40: the test needs some";
  // Some kept heads were below full strength before the fix (the eval gate of lambda mode is
  // fractional), and are whole after it.
  int fractional = 0;
  for (const auto& h : before->heads) fractional += h.gate > 0.0 && h.gate < 1.0;
  EXPECT_GT(fractional, 0) << "step " << before->step;
  EXPECT_EQ(run::read_checkpoint_info(dir / "l" / "pruned").architecture.total(), kept_at_fix);
  auto init = run::load_model(run::read_checkpoint_info(c.prune.init_from), torch::kCPU);
  auto at_fix = run::load_model(run::read_checkpoint_info(dir / "l" / "checkpoints" / "step-40"),
                                torch::kCPU);
  const auto want = init->named_parameters();
  for (const auto& p : at_fix->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), want[p.key()])) << p.key();
}

// prune.rewind: at the fixing point the weights are prune.init_from's again and the learning
// rate's warm-up starts over; the recovery steps then fine-tune them under the gates' mask.
TEST(PruneRun, RewindRestartsTheRecoveryFromTheInitWeights) {
  TempDir dir;
  Config c = fixed_at_40(dir);
  c.prune.rewind = true;
  c.train.lr_schedule = LrSchedule::kConstant;
  c.train.log_every = 1;
  run_prune(c, dir / "w");
  EXPECT_EQ(run::read_checkpoint_info(dir / "w" / "pruned").architecture.total(), 5);
  // The mask of the recovery is 0/1: the rewound heads are kept at full strength.
  for (const auto& g : run::read_gates(dir / "w" / "gates.jsonl")) {
    if (g.step < 40) continue;
    int kept = 0;
    for (const auto& h : g.heads) {
      EXPECT_TRUE(h.gate == 0.0 || h.gate == 1.0) << g.step << " " << h.gate;
      kept += h.gate == 1.0;
    }
    EXPECT_EQ(kept, 5) << g.step;
  }
  // The checkpoint of step 40 (saved after the fixing step) holds the init model's weights.
  auto init = run::load_model(run::read_checkpoint_info(c.prune.init_from), torch::kCPU);
  auto at_fix = run::load_model(run::read_checkpoint_info(dir / "w" / "checkpoints" / "step-40"),
                                torch::kCPU);
  auto at_20 = run::load_model(run::read_checkpoint_info(dir / "w" / "checkpoints" / "step-20"),
                               torch::kCPU);
  const auto want = init->named_parameters();
  for (const auto& p : at_fix->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), want[p.key()])) << p.key();
  EXPECT_FALSE(
      torch::equal(at_20->encoder_layers[0]->fc1->weight, init->encoder_layers[0]->fc1->weight));
  // The rate: warm-up from step 1 (10 steps from 1e-7 to 1e-3, linear), constant to step 40,
  // then the same warm-up again from step 41.
  auto warm = [&](int64_t k) {
    return k < 10 ? 1e-7 + (1e-3 - 1e-7) * static_cast<double>(k) / 10.0 : 1e-3;
  };
  std::map<int64_t, double> lr;
  for (const auto& e : events(dir / "w", "train")) lr[e["step"].get<int64_t>()] = e["lr"];
  ASSERT_TRUE(lr.count(1) && lr.count(40) && lr.count(41) && lr.count(45) && lr.count(60));
  EXPECT_NEAR(lr[1], warm(1), 1e-12);
  EXPECT_NEAR(lr[40], 1e-3, 1e-12);
  EXPECT_NEAR(lr[41], warm(1), 1e-12);
  EXPECT_NEAR(lr[45], warm(5), 1e-12);
  EXPECT_NEAR(lr[60], 1e-3, 1e-12);
  // The weights trained on from there.
  auto last =
      run::load_model(run::read_checkpoint_info(dir / "w" / "checkpoints" / "last"), torch::kCPU);
  EXPECT_FALSE(
      torch::equal(last->encoder_layers[0]->fc1->weight, init->encoder_layers[0]->fc1->weight));
  // export-pruned of a checkpoint of the recovery steps takes the 0/1 mask the run trained and
  // evaluated under: from `last` it writes what the run's own pruned/ holds (the gates' fractional
  // values would scale the kept heads of the rewound weights down).
  prune::export_pruned(dir / "w" / "checkpoints" / "last", dir / "exported");
  auto exported = run::load_model(run::read_checkpoint_info(dir / "exported"), torch::kCPU);
  auto pruned = run::load_model(run::read_checkpoint_info(dir / "w" / "pruned"), torch::kCPU);
  const auto pruned_weights = pruned->named_parameters();
  for (const auto& p : exported->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), pruned_weights[p.key()])) << p.key();
  // Rewind needs the recovery steps.
  Config bad = c;
  bad.prune.recovery_steps = 0;
  const std::string e = load_error(bad);
  EXPECT_NE(e.find("prune.rewind (from bad"), std::string::npos) << e;
}

// prune.freeze_until_fixed: before the mask is fixed only the gates move (every weight is still
// prune.init_from's at the fixing step, without a rewind); after it the weights train under the
// mask; without recovery steps the option is refused (the weights would never train).
TEST(PruneRun, FreezeUntilFixedTrainsOnlyTheGatesBeforeTheMask) {
  TempDir dir;
  Config c = fixed_at_40(dir);
  c.prune.freeze_until_fixed = true;
  run_prune(c, dir / "f");
  EXPECT_EQ(run::read_checkpoint_info(dir / "f" / "pruned").architecture.total(), 5);
  auto init = run::load_model(run::read_checkpoint_info(c.prune.init_from), torch::kCPU);
  const auto want = init->named_parameters();
  for (const char* step : {"step-20", "step-40"}) {
    auto m =
        run::load_model(run::read_checkpoint_info(dir / "f" / "checkpoints" / step), torch::kCPU);
    for (const auto& p : m->named_parameters())
      EXPECT_TRUE(torch::equal(p.value(), want[p.key()])) << step << " " << p.key();
  }
  // The gates did move in the frozen steps: some head's P(open) changed by step 20.
  const auto snapshots = run::read_gates(dir / "f" / "gates.jsonl");
  ASSERT_GE(snapshots.size(), 2u);
  ASSERT_EQ(snapshots[0].step, 0);
  ASSERT_EQ(snapshots[1].step, 20);
  double moved = 0;
  for (size_t i = 0; i < snapshots[0].heads.size(); ++i)
    moved = std::max(moved, std::abs(snapshots[1].heads[i].p_open - snapshots[0].heads[i].p_open));
  EXPECT_GT(moved, 0.05);
  // After the fixing step the weights train.
  auto last =
      run::load_model(run::read_checkpoint_info(dir / "f" / "checkpoints" / "last"), torch::kCPU);
  EXPECT_FALSE(
      torch::equal(last->encoder_layers[0]->fc1->weight, init->encoder_layers[0]->fc1->weight));
  EXPECT_FALSE(torch::equal(last->src_embed->weight, init->src_embed->weight));
  Config bad = c;
  bad.prune.recovery_steps = 0;
  const std::string e = load_error(bad);
  EXPECT_NE(e.find("prune.freeze_until_fixed (from bad"), std::string::npos) << e;
}

// L0 pruning that records, step by step, the gate values each training batch's forward pass sees.
class RecordingL0 : public prune::L0Pruning {
 public:
  RecordingL0(const Config& c, const train::TrainOptions& o,
              std::vector<std::vector<torch::Tensor>>* steps)
      : L0Pruning(c, o), steps_(steps) {}
  void begin_step() override {
    L0Pruning::begin_step();
    steps_->emplace_back();
  }
  void before_forward(const data::Batch& batch) override {
    L0Pruning::before_forward(batch);
    steps_->back().push_back(gates()->layers().front().attention->head_scale().detach().clone());
  }

 private:
  std::vector<std::vector<torch::Tensor>>* steps_;
};

// METHODS.md: one u per head per step, shared by the whole batch. With train.update_freq 2 both
// batches of a step see the same gates; the next step draws again. Per-example noise draws for
// every example of every batch.
TEST(PruneRun, GateNoiseIsDrawnOncePerOptimizerStep) {
  TempDir dir;
  Config c = baseline(dir);
  c.prune.lambda = 0.05;
  c.prune.init_log_alpha = 0.0;  // samples inside (0, 1), not clamped at 1
  c.train.max_tokens = 24;       // several batches an epoch
  c.train.update_freq = 2;
  c.train.max_steps = 4;
  c.train.eval_every = 4;
  for (const auto noise : {GateNoise::kHead, GateNoise::kExample}) {
    c.prune.noise = noise;
    train::TrainOptions o;
    o.run_dir = dir / (noise == GateNoise::kHead ? "head" : "example");
    o.init_from = c.prune.init_from;
    std::vector<std::vector<torch::Tensor>> steps;
    train::Trainer(c, o, std::make_unique<RecordingL0>(c, o, &steps)).run();
    ASSERT_EQ(steps.size(), 4u);
    int pairs = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
      ASSERT_FALSE(steps[s].empty());
      ASSERT_LE(steps[s].size(), 2u);  // an epoch's last step may have one batch
      const auto& a = steps[s].front();
      if (s > 0) {
        EXPECT_FALSE(torch::equal(a, steps[s - 1].front())) << "step " << s + 1;
      }
      if (steps[s].size() < 2) continue;
      ++pairs;
      const auto& b = steps[s][1];
      if (noise == GateNoise::kHead) {
        EXPECT_EQ(a.dim(), 1);
        EXPECT_TRUE(torch::equal(a, b)) << "step " << s + 1 << ": " << a << b;
      } else {
        EXPECT_EQ(a.dim(), 2);  // [batch, H]
        EXPECT_FALSE(a.size(0) == b.size(0) && torch::equal(a, b)) << "step " << s + 1;
      }
    }
    EXPECT_GE(pairs, 2) << "too few steps of two batches to test anything";
  }
}

// Target mode whose gates reach 5 heads within a few steps after a 10-step ramp (fast multipliers
// and gates), the mask fixed then: the tests of fix_at_target, rewind and exact_recovery.
Config fast_target(const TempDir& dir, int64_t recovery_steps) {
  Config c = baseline(dir);
  c.prune.target_heads = 5;
  c.prune.target_warmup_steps = 10;
  c.prune.lagrangian_lr = 20.0;
  c.prune.gate_lr = 0.3;
  c.prune.recovery_steps = recovery_steps;
  c.prune.fix_at_target = true;
  return c;
}

TEST(PruneRun, FixAtTargetFixesTheMaskWhenTheExpectedCountReachesTheTarget) {
  TempDir dir;
  Config c = fast_target(dir, 10);  // at the latest at step 50 of 60
  c.train.eval_every = 5;
  ::testing::internal::CaptureStderr();
  run_prune(c, dir / "f");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(run::read_checkpoint_info(dir / "f" / "pruned").architecture.total(), 5);
  // The final log line names the fixed mask (what is pruned), not a rounding of the final gates.
  const auto state =
      nlohmann::json::parse(io::read_file(dir / "f" / "checkpoints" / "last" / "prune_state.json"));
  ASSERT_TRUE(state.contains("mask_fixed_at")) << state.dump();
  const std::string fixed_line = fmt::format("target 5 heads: the mask fixed at step {} keeps 5 (",
                                             state["mask_fixed_at"].get<int64_t>());
  EXPECT_NE(err.find(fixed_line), std::string::npos) << err;
  EXPECT_EQ(err.find("the gates left"), std::string::npos) << err;
  // The first evaluation with the mask fixed comes before step 50; from there on the gates do not
  // move, and their expected count is at or below the target (it had reached it).
  int64_t first_fixed = -1;
  double e_fixed = -1;
  for (const auto& e : events(dir / "f", "eval")) {
    if (!e.value("mask_fixed", false)) {
      EXPECT_EQ(first_fixed, -1) << "an evaluation without the mask after one with it";
      EXPECT_GT(e["expected_open"].get<double>(), 5.0) << e.dump();
      continue;
    }
    if (first_fixed < 0) {
      first_fixed = e["step"].get<int64_t>();
      e_fixed = e["expected_open"].get<double>();
    }
    EXPECT_EQ(e["expected_open"].get<double>(), e_fixed);
  }
  EXPECT_GE(first_fixed, 10);
  EXPECT_LT(first_fixed, 50);
  EXPECT_LE(e_fixed, 5.0);
  // fix_at_target needs target mode and recovery steps.
  Config bad = c;
  bad.prune.recovery_steps = 0;
  const std::string e = load_error(bad);
  EXPECT_NE(e.find("prune.fix_at_target (from bad"), std::string::npos) << e;
}

// prune.target_heads_per_type: one Lagrangian term per gated type on that type's own gap, gap_t =
// sum of P_open over the type's heads / n_t - its target fraction (ramped), the terms summed, and
// each type's multipliers ascending on its own gap (lambda1 += lr gap, lambda2 += lr gap^2).
TEST(PruneRun, PerTypeLagrangianSumsEachTypesTermAndAscendsOnItsOwnGap) {
  TempDir dir;
  Config c;
  c.model = small_model_config();
  c.prune.attention = {"enc_self", "dec_self", "enc_dec"};
  c.prune.target_heads_per_type = {2, 4, 6};
  c.prune.target_warmup_steps = 10;
  c.prune.lagrangian_lr = 0.5;
  train::TrainOptions o;
  o.run_dir = dir.path();
  prune::L0Pruning l0(c, o);
  model::Transformer m(c.model, model::Architecture::uniform(c.model), 30, 30);
  l0.parameter_groups(m, torch::kCPU);
  const double log_alpha[] = {3.0, 0.0, -1.0};  // enc_self, dec_self, enc_dec
  {
    torch::NoGradGuard g;
    for (auto& l : l0.gates()->layers()) l.gate->log_alpha.fill_(log_alpha[int(l.type)]);
  }
  // Eight heads a type: gap_t = P_open(log_alpha_t) - target_t / 8 after the ramp (step 20).
  std::vector<double> gap;
  for (int t = 0; t < 3; ++t)
    gap.push_back(p_open_by_formula(log_alpha[t]) - c.prune.target_heads_per_type[t] / 8.0);
  ASSERT_GT(gap[0], 0.1);   // enc_self: too many heads open
  ASSERT_LT(gap[2], -0.1);  // enc_dec: too few
  const auto r0 = l0.regulariser(20);
  ASSERT_EQ(r0.constraints.size(), 3u);
  for (int t = 0; t < 3; ++t) EXPECT_NEAR(r0.constraints[t], gap[t], 1e-6) << t;
  EXPECT_EQ(r0.term.item<double>(), 0.0);  // the multipliers start at 0
  l0.after_step(20, r0);
  auto r1 = l0.regulariser(20);
  double expected = 0;
  for (double g : gap) expected += (0.5 * g) * g + (0.5 * g * g) * g * g;
  EXPECT_NEAR(r1.term.item<double>(), expected, 1e-6);
  // The gradient closes enc_self's heads and opens enc_dec's (descent on log_alpha).
  r1.term.backward();
  for (const auto& l : l0.gates()->layers()) {
    const auto grad = l.gate->log_alpha.grad();
    if (l.type == AttentionType::kEncSelf) {
      EXPECT_GT(grad.min().item<double>(), 0.0);
    } else if (l.type == AttentionType::kEncDec) {
      EXPECT_LT(grad.max().item<double>(), 0.0);
    }
  }
  // Halfway through the ramp, each type's target fraction is halfway from 1 to its own.
  const auto r2 = l0.regulariser(5);
  for (int t = 0; t < 3; ++t) {
    const double halfway = 1.0 + (c.prune.target_heads_per_type[t] / 8.0 - 1.0) * 0.5;
    EXPECT_NEAR(r2.constraints[t], p_open_by_formula(log_alpha[t]) - halfway, 1e-6) << t;
  }
  // The evaluation record: the total and each type's count, target now and multipliers.
  nlohmann::json rec;
  l0.evaluation_extras(20, rec);
  EXPECT_EQ(rec["target_heads"], 12);
  EXPECT_EQ(rec["target_heads_per_type"]["dec_self"], 4);
  EXPECT_DOUBLE_EQ(rec["target_now_per_type"]["enc_dec"].get<double>(), 6.0);
  EXPECT_NEAR(rec["lambda1_per_type"]["enc_self"].get<double>(), 0.5 * gap[0], 1e-6);
  EXPECT_NEAR(rec["expected_open_per_type"]["enc_self"].get<double>(), 8 * p_open_by_formula(3.0),
              1e-5);
  // Bad per-type targets: more heads than the type has; an ungated type that loses heads.
  auto error_of = [&](Config bad) {
    return testing::error_of([&] {
      prune::L0Pruning x(bad, o);
      model::Transformer mm(bad.model, model::Architecture::uniform(bad.model), 30, 30);
      x.parameter_groups(mm, torch::kCPU);
    });
  };
  Config big = c;
  big.prune.target_heads_per_type = {2, 9, 6};
  EXPECT_NE(error_of(big).find("asks for 9 dec_self heads, but the model has 8"), std::string::npos)
      << error_of(big);
  Config ungated = c;
  ungated.prune.attention = {"enc_self"};
  ungated.prune.target_heads_per_type = {2, 7, 8};
  const std::string e = error_of(ungated);
  EXPECT_NE(e.find("asks for 7 dec_self heads, but dec_self is not in prune.attention (enc_self): "
                   "it keeps all 8"),
            std::string::npos)
      << e;
  ungated.prune.target_heads_per_type = {2, 8, 8};
  EXPECT_EQ(error_of(ungated), "(no error)");
}

// A whole run with a per-type target: the export keeps exactly each type's count, the records
// say so, a checkpoint holds one pair of multipliers per type and is refused by a run with one
// total target.
TEST(PruneRun, PerTypeTargetEndsWithEachTypesCount) {
  TempDir dir;
  Config c = fast_target(dir, 10);
  c.prune.target_heads = 0;
  c.prune.target_heads_per_type = {1, 3, 2};
  c.train.eval_every = 5;
  run_prune(c, dir / "p");
  const auto arch = run::read_checkpoint_info(dir / "p" / "pruned").architecture;
  EXPECT_EQ(arch.total(AttentionType::kEncSelf), 1);
  EXPECT_EQ(arch.total(AttentionType::kDecSelf), 3);
  EXPECT_EQ(arch.total(AttentionType::kEncDec), 2);
  const auto summary = pruning_summary(dir / "p");
  EXPECT_EQ(summary["target_heads"], 6);
  EXPECT_EQ(summary["target_heads_per_type"], nlohmann::json({1, 3, 2}));
  const auto evals = events(dir / "p", "eval");
  EXPECT_TRUE(evals.back().value("mask_fixed", false)) << evals.back().dump();
  EXPECT_EQ(evals.front()["target_heads_per_type"]["enc_dec"], 2);
  const fs::path last = dir / "p" / "checkpoints" / "last";
  const auto state =
      nlohmann::json::parse(io::read_file(run::CheckpointFolder{last}.prune_state()));
  EXPECT_EQ(state["lambda1"].size(), 3u);
  auto load_into = [&](const Config& cfg) {
    return testing::error_of([&] {
      train::TrainOptions o;
      o.run_dir = dir / "x";
      prune::L0Pruning l0(cfg, o);
      auto m = run::load_model(run::read_checkpoint_info(cfg.prune.init_from), torch::kCPU);
      l0.parameter_groups(m, torch::kCPU);
      l0.load(last);
    });
  };
  EXPECT_EQ(load_into(c), "(no error)");
  Config one = c;
  one.prune.target_heads_per_type.clear();
  one.prune.target_heads = 6;
  EXPECT_NE(load_into(one).find("lambda1 has 3 values, but the run's target has 1 groups"),
            std::string::npos)
      << load_into(one);
  // The two targets together, and Fisher's cost budgets with l0: clear errors.
  Config both = c;
  both.prune.target_heads = 6;
  EXPECT_NE(load_error(both).find("are two targets of the gates"), std::string::npos)
      << load_error(both);
  Config flops = c;
  flops.prune.target_heads_per_type.clear();
  flops.prune.flops_fraction = 0.5;
  EXPECT_NE(load_error(flops).find("prune.flops_fraction (from bad"), std::string::npos)
      << load_error(flops);
}

// 7 heads split between three types of 8 heads by their expected open heads `e`, by hand: each
// quota 7 e_t / sum e (none reaches 8 in these runs), its floor, then one more head to the largest
// fractional parts (ties to the earlier type).
std::vector<int64_t> split_of_seven_by_hand(const double e[3]) {
  const double sum = e[0] + e[1] + e[2];
  std::vector<int64_t> counts(3);
  int64_t assigned = 0;
  double frac[3];
  for (int t = 0; t < 3; ++t) {
    const double q = 7 * e[t] / sum;
    EXPECT_LT(q, 8.0);
    counts[t] = static_cast<int64_t>(std::floor(q));
    frac[t] = q - counts[t];
    assigned += counts[t];
  }
  for (; assigned < 7; ++assigned) {
    int best = 0;
    for (int t = 1; t < 3; ++t)
      if (frac[t] > frac[best]) best = t;
    ++counts[best];
    frac[best] = -1;
  }
  return counts;
}

// prune.target_split expected in a whole run: the mask fixed at the target keeps, per type, that
// type's share of the gates' expected open heads at the fixing step, which the test computes from
// the checkpoint's log_alpha by the formula and rounds by largest remainder itself.
TEST(PruneRun, ExpectedSplitFixesEachTypesShareOfTheExpectedOpenHeads) {
  TempDir dir;
  Config c = fast_target(dir, 10);
  c.prune.target_heads = 7;
  c.prune.target_split = TargetSplit::kExpected;
  c.prune.rewind = true;
  c.train.eval_every = 5;
  run_prune(c, dir / "x");
  const fs::path last = dir / "x" / "checkpoints" / "last";
  const auto state =
      nlohmann::json::parse(io::read_file(run::CheckpointFolder{last}.prune_state()));
  ASSERT_TRUE(state.contains("mask_fixed_at")) << state.dump();
  // The gates as the run left them (their log_alpha held at the fixing step's since then).
  train::TrainOptions o;
  o.run_dir = dir / "y";
  o.init_from = c.prune.init_from;
  prune::L0Pruning l0(c, o);
  auto m = run::load_model(run::read_checkpoint_info(c.prune.init_from), torch::kCPU);
  l0.parameter_groups(m, torch::kCPU);
  l0.load(last);
  double e[3] = {0, 0, 0};
  for (const auto& l : l0.gates()->layers()) {
    const auto la = l.gate->log_alpha.detach();
    for (int64_t h = 0; h < la.size(0); ++h)
      e[static_cast<int>(l.type)] += p_open_by_formula(la[h].item<double>());
  }
  const auto counts = split_of_seven_by_hand(e);
  const auto arch = run::read_checkpoint_info(dir / "x" / "pruned").architecture;
  EXPECT_EQ(arch.total(AttentionType::kEncSelf), counts[0]);
  EXPECT_EQ(arch.total(AttentionType::kDecSelf), counts[1]);
  EXPECT_EQ(arch.total(AttentionType::kEncDec), counts[2]);
  EXPECT_EQ(arch.total(), 7);
  // One total's evaluation records carry each type's expected open heads too.
  const auto evals = events(dir / "x", "eval");
  EXPECT_NEAR(evals.back()["expected_open_per_type"]["dec_self"].get<double>(), e[1], 1e-4);
  // The split is a rule of target mode: in lambda mode a clear error; with a count per type or one
  // gated type there is nothing to split and the config loads (the mask is top's: the unit test).
  Config lambda = c;
  lambda.prune.target_heads = 0;
  lambda.prune.fix_at_target = false;
  lambda.prune.rewind = false;
  EXPECT_NE(load_error(lambda).find("prune.target_split expected (from bad"), std::string::npos)
      << load_error(lambda);
  EXPECT_NE(load_error(lambda).find("it needs prune.method l0"), std::string::npos);
  // prune.split_floor is a rule of the expected split: with the top rule a clear error.
  Config floor_top = c;
  floor_top.prune.split_floor = 0.05;
  EXPECT_EQ(load_error(floor_top), "(no error)");
  floor_top.prune.target_split = TargetSplit::kTop;
  EXPECT_NE(load_error(floor_top).find("prune.split_floor 0.05 (from bad"), std::string::npos)
      << load_error(floor_top);
  EXPECT_NE(load_error(floor_top).find("prune.target_split is top"), std::string::npos);
  Config typed = c;
  typed.prune.target_heads = 0;
  typed.prune.target_heads_per_type = {1, 3, 3};
  EXPECT_EQ(load_error(typed), "(no error)");
  Config one_type = c;
  one_type.prune.attention = {"enc_self"};
  EXPECT_EQ(load_error(one_type), "(no error)");
}

// prune.exact_recovery: the run ends recovery_steps after the step the mask was fixed at (not at
// train.max_steps), so the rewound model trains exactly that many steps, with the rate's schedule
// (warm-up) running over them.
TEST(PruneRun, ExactRecoveryEndsTheRunRecoveryStepsAfterTheFix) {
  TempDir dir;
  Config c = fast_target(dir, 15);  // fixed at step 45 of 60 at the latest
  c.prune.exact_recovery = true;
  c.prune.rewind = true;
  c.train.lr_schedule = LrSchedule::kConstant;
  c.train.log_every = 1;
  c.train.eval_every = 5;
  run_prune(c, dir / "x");
  EXPECT_EQ(run::read_checkpoint_info(dir / "x" / "pruned").architecture.total(), 5);
  const auto state =
      nlohmann::json::parse(io::read_file(dir / "x" / "checkpoints" / "last" / "prune_state.json"));
  ASSERT_TRUE(state.contains("mask_fixed_at")) << state.dump();
  const int64_t fixed_at = state["mask_fixed_at"].get<int64_t>();
  EXPECT_GE(fixed_at, 10);
  EXPECT_LT(fixed_at, 45) << "the gates did not reach the target before the latest fixing point";
  // The last step trained and the summary: exactly 15 steps after the fixing point.
  const auto train = events(dir / "x", "train");
  ASSERT_FALSE(train.empty());
  EXPECT_EQ(train.back()["step"].get<int64_t>(), fixed_at + 15);
  const auto summary = nlohmann::json::parse(io::read_file(dir / "x" / "summary.json"));
  EXPECT_EQ(summary["steps"].get<int64_t>(), fixed_at + 15) << summary.dump();
  // The warm-up (10 steps from 1e-7 to 1e-3) restarts after the fixing point.
  std::map<int64_t, double> lr;
  for (const auto& e : train) lr[e["step"].get<int64_t>()] = e["lr"];
  EXPECT_NEAR(lr[fixed_at + 1], 1e-7 + (1e-3 - 1e-7) / 10.0, 1e-12);
  EXPECT_NEAR(lr[fixed_at + 15], 1e-3, 1e-12);
  // Without fix_at_target the fixing point is train.max_steps - recovery_steps already: an error.
  Config bad = c;
  bad.prune.fix_at_target = false;
  const std::string e = load_error(bad);
  EXPECT_NE(e.find("prune.exact_recovery (from bad"), std::string::npos) << e;
}

// The rewound recovery of a prune run (fixed 0/1 mask, the init weights again, Adam afresh, the
// warm-up again, no regulariser) against `export-pruned --heads-of RUN` + `train --init-from` for
// the same number of steps, in `precision`. The tiny corpus is one batch and dropout is 0, so both
// see the same batches and draws whatever their positions in the epoch: the two models must end
// with the same weights (up to the rounding of masked against removed heads). Anything else the
// rewound phase did differently (a frozen part, a rate, a leftover of the gates, a product run in
// another precision) fails here.
void expect_rewound_recovery_trains_as_train_does(const std::string& precision) {
  TempDir dir;
  Config c = fast_target(dir, 15);
  c.train.precision = precision;
  c.prune.exact_recovery = true;
  c.prune.rewind = true;
  c.train.lr_schedule = LrSchedule::kConstant;
  ASSERT_EQ(c.model.dropout, 0.0);
  run_prune(c, dir / "x");
  prune::export_with_mask_of(c.prune.init_from, dir / "x", dir / "init");
  Config t = c;
  t.train.max_steps = 15;
  t.prune = Config{}.prune;  // train reads no prune key, but checks them
  train::TrainOptions o;
  o.run_dir = dir / "ft";
  o.init_from = dir / "init";
  train::train_command(t, o);
  auto pruned = run::load_model(run::read_checkpoint_info(dir / "x" / "pruned"), torch::kCPU);
  auto tuned =
      run::load_model(run::read_checkpoint_info(dir / "ft" / "checkpoints" / "last"), torch::kCPU);
  auto init = run::load_model(run::read_checkpoint_info(dir / "init"), torch::kCPU);
  const auto arch = pruned->architecture();
  EXPECT_EQ(arch.summary(), tuned->architecture().summary());
  // 5 of 24 heads: some layer has none left, the case where a layer without heads must add what a
  // masked layer adds (its output projection's bias, in bf16 rounded as there).
  bool empty_layer = false;
  for (auto type : model::kAttentionTypes) {
    for (auto h : arch.heads(type)) empty_layer = empty_layer || h == 0;
  }
  EXPECT_TRUE(empty_layer) << arch.summary();
  const auto want = tuned->named_parameters();
  const auto start = init->named_parameters();
  for (const auto& p : pruned->named_parameters()) {
    ASSERT_TRUE(want.contains(p.key())) << p.key();
    auto got = p.value(), w = want[p.key()];
    ASSERT_EQ(got.sizes(), w.sizes()) << p.key();
    if (p.key().find("in_proj_bias") != std::string::npos) {
      // Not the key bias: a query's scores all shift by q.b_k, which the softmax removes, so its
      // gradient is 0 up to rounding, and Adam's first steps (about lr x sign(g)) move it by
      // +-lr at random in both runs. It changes nothing the model computes (the logits below).
      const int64_t hd = got.size(0) / 3;
      got = torch::cat({got.narrow(0, 0, hd), got.narrow(0, 2 * hd, hd)});
      w = torch::cat({w.narrow(0, 0, hd), w.narrow(0, 2 * hd, hd)});
    }
    EXPECT_TRUE(torch::allclose(got, w, 1e-4, 1e-5))
        << p.key() << ": largest difference " << (got - w).abs().max().item<float>();
  }
  // The same function: the logits of both models on one batch.
  torch::NoGradGuard no_grad;
  pruned->eval();
  tuned->eval();
  const auto src = torch::randint(4, 30, {3, 7});
  const auto tgt = torch::randint(4, 30, {3, 5});
  const auto a = pruned->forward(src, tgt), b = tuned->forward(src, tgt);
  EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-4)) << (a - b).abs().max().item<float>();
  // Both trained: 15 steps moved the weights away from the init model's.
  EXPECT_GT(
      (want["encoder.0.fc1.weight"] - start["encoder.0.fc1.weight"]).abs().max().item<float>(),
      1e-3);
}

TEST(PruneRun, RewoundRecoveryTrainsAsTrainDoesOnTheExportedHeads) {
  expect_rewound_recovery_trains_as_train_does("fp32");
}

TEST(PruneRun, RewoundRecoveryTrainsAsTrainDoesOnTheExportedHeadsInBf16) {
  // In bf16 a layer left without heads once added its bias in fp32 while the masked layer added
  // it rounded to bf16: the two routes' weights then parted by up to 4e-3 in 15 steps.
  if (cpu_native_bf16().empty()) GTEST_SKIP() << "this CPU has no native bf16 arithmetic";
  // With AMX, oneDNN's tiled kernels order a product's sums by its shapes, so a masked head's
  // product and a removed head's sum in different orders and their bf16-rounded outputs part by
  // an ulp now and then: 15 Adam steps then part the weights by up to 2e-3 (seen on an Intel Xeon
  // of family 6, model 167) for the kernels' sake alone. What is compared here is the two routes,
  // so where the CPU has AMX the test runs again in a child process with oneDNN held to its
  // AVX-512 bf16 kernels (ONEDNN_MAX_CPU_ISA, read once when oneDNN starts): the same products of
  // bf16 inputs, rounded to bf16 as with AMX, summed in an order the shapes do not change.
  if (cpu_native_bf16().find("amx_bf16") != std::string::npos &&
      std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    TempDir tmp;
    const std::string cmd =
        fmt::format("ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 {} --gtest_filter={}.{} >{} 2>&1",
                    fs::read_symlink("/proc/self/exe").string(), test->test_suite_name(),
                    test->name(), (tmp / "log").string());
    const int status = std::system(cmd.c_str());
    const std::string out = io::read_file(tmp / "log");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_NE(out.find("[  PASSED  ] 1 test."), std::string::npos) << out;
    return;
  }
  expect_rewound_recovery_trains_as_train_does("bf16");
}

TEST(PruneRun, DistillationObjectiveMixesCrossEntropyWithTheInitModelsKl) {
  // The objective a batch back-propagates: (1 - w) x its cross-entropy + w x T^2 KL(teacher ||
  // student), the teacher being prune.init_from's model, computed here independently (loaded
  // again, eval mode) from a student whose weights moved away from it.
  TempDir dir;
  Config c = baseline(dir);
  c.prune.distill_weight = 0.25;
  c.prune.distill_temperature = 2;
  train::TrainOptions o;
  o.run_dir = dir / "kd";
  o.init_from = c.prune.init_from;
  prune::L0Pruning l0(c, o);
  const auto info = run::read_checkpoint_info(c.prune.init_from);
  auto student = run::load_model(info, torch::kCPU);
  {
    torch::NoGradGuard ng;
    student->encoder_layers[0]->fc1->weight.add_(
        torch::randn_like(student->encoder_layers[0]->fc1->weight) * 0.1);
  }
  l0.parameter_groups(student, torch::kCPU);
  data::Batch b;
  b.src = torch::tensor({{5, 6, 7, data::kEosId}, {8, 9, data::kEosId, data::kPadId}});
  b.tgt_in = torch::tensor({{data::kBosId, 10, 11}, {data::kBosId, 12, data::kPadId}});
  b.tgt_out = torch::tensor({{10, 11, data::kEosId}, {12, data::kEosId, data::kPadId}});
  b.ids = {0, 1};
  student->eval();
  const auto logits = student->forward(b.src, b.tgt_in);
  const auto ce = torch::tensor(3.5);
  const auto got = l0.batch_objective(b, logits, ce, PrecisionChoice{});
  auto teacher = run::load_model(info, torch::kCPU);
  teacher->eval();
  const auto kl =
      model::distillation_loss(logits, teacher->forward(b.src, b.tgt_in).detach(), b.tgt_out, 2);
  EXPECT_GT(kl.item<double>(), 1e-4);  // the student differs from the teacher
  EXPECT_NEAR(got.item<double>(), 0.75 * 3.5 + 0.25 * kl.item<double>(), 1e-5);
  // Weight 0: the cross-entropy alone, the same tensor.
  c.prune.distill_weight = 0;
  prune::L0Pruning plain(c, o);
  EXPECT_TRUE(plain.batch_objective(b, logits, ce, PrecisionChoice{}).is_same(ce));
  // A whole run with distillation trains and exports.
  c.prune.distill_weight = 0.5;
  c.train.max_steps = 4;
  c.train.eval_every = 4;
  run_prune(c, dir / "run");
  EXPECT_EQ(run::read_checkpoint_info(dir / "run" / "pruned").architecture.total(), 24);
}

TEST(PruneRun, GatedModelInEvalModeEqualsThePrunedCheckpoint) {
  TempDir dir;
  Config c = baseline(dir);
  c.prune.lambda = 0.5;
  c.prune.attention = {"enc_self", "enc_dec"};
  c.prune.train_parts = {"encoder"};  // decoder and embeddings frozen
  train::TrainOptions o;
  o.run_dir = dir / "g";
  o.init_from = c.prune.init_from;
  prune::PruneTrainer trainer(c, o);
  trainer.run();
  const auto info = run::read_checkpoint_info(dir / "g" / "pruned");
  auto pruned = run::load_model(info, torch::kCPU);
  auto& gated = trainer.model();
  trainer.gates()->apply_values(trainer.final_values());
  gated->eval();
  pruned->eval();
  torch::NoGradGuard ng;
  auto src = torch::randint(4, info.src_vocab_size, {4, 7});
  auto tgt = torch::randint(4, info.tgt_vocab_size, {4, 6});
  EXPECT_TRUE(torch::allclose(gated->forward(src, tgt), pruned->forward(src, tgt), 1e-5, 1e-5));
  // Frozen parts did not move: the decoder equals the baseline's.
  const auto base = run::load_model(run::read_checkpoint_info(c.prune.init_from), torch::kCPU);
  EXPECT_TRUE(
      torch::equal(base->decoder_layers[0]->fc1->weight, gated->decoder_layers[0]->fc1->weight));
  EXPECT_FALSE(
      torch::equal(base->encoder_layers[0]->fc1->weight, gated->encoder_layers[0]->fc1->weight));
  // Decoder self-attention was not gated.
  EXPECT_EQ(info.architecture.total(model::AttentionType::kDecSelf), 8);
}

// The gates of a finished prune run as the run left them (checkpoints/last), read through an
// L0Pruning of `c` (which must not have gate_seeds): log_alpha per (type, layer).
std::map<std::pair<int, int>, torch::Tensor> gates_of(const Config& c, const fs::path& run,
                                                      const fs::path& scratch) {
  train::TrainOptions o;
  o.run_dir = scratch;
  o.init_from = c.prune.init_from;
  prune::L0Pruning l0(c, o);
  auto m = run::load_model(run::read_checkpoint_info(c.prune.init_from), torch::kCPU);
  l0.parameter_groups(m, torch::kCPU);
  l0.load(run / "checkpoints" / "last");
  std::map<std::pair<int, int>, torch::Tensor> out;
  for (const auto& l : l0.gates()->layers())
    out[{static_cast<int>(l.type), l.layer}] = l.gate->log_alpha.detach().clone();
  return out;
}

// prune.gate_seeds: one gate run per seed (the recipe's gated steps with that seed, ending at its
// fixing step), the mask chosen from the mean of their P_open by the run's rule (here the expected
// split: each type's share of the mean's expected open heads by largest remainder, then the
// largest mean P_open within the type), and exactly recovery_steps steps under that mask from the
// init weights. The mask by hand from the gate runs' log_alpha.
TEST(PruneRun, GateSeedsChooseTheMaskByTheMeanOfTheGateRunsPOpen) {
  TempDir dir;
  Config c = fast_target(dir, 10);
  c.prune.target_heads = 7;
  c.prune.target_split = TargetSplit::kExpected;
  c.prune.rewind = true;
  c.prune.exact_recovery = true;
  c.train.eval_every = 5;
  c.train.log_every = 1;
  Config avg = c;
  avg.prune.gate_seeds = {3, 4};
  EXPECT_EQ(load_error(avg), "(no error)");
  train::TrainOptions o;
  o.run_dir = dir / "avg";
  o.init_from = c.prune.init_from;
  ::testing::internal::CaptureStderr();
  const auto summary = prune::prune_command(avg, o);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(summary.interrupted);
  // Each gate run is the recipe's own gated steps with its seed: a full run of the recipe with
  // seed 3 holds the same gates from its fixing step on, and the gate run ends at that step.
  Config solo = c;
  solo.seed = 3;
  run_prune(solo, dir / "solo3");
  const auto solo_state = nlohmann::json::parse(
      io::read_file(dir / "solo3" / "checkpoints" / "last" / "prune_state.json"));
  const fs::path run3 = dir / "avg" / "gate-seeds" / "seed-3";
  const fs::path run4 = dir / "avg" / "gate-seeds" / "seed-4";
  const auto state3 =
      nlohmann::json::parse(io::read_file(run3 / "checkpoints" / "last" / "prune_state.json"));
  ASSERT_TRUE(state3.contains("mask_fixed_at")) << state3.dump();
  EXPECT_EQ(state3["mask_fixed_at"], solo_state["mask_fixed_at"]);
  EXPECT_EQ(nlohmann::json::parse(io::read_file(run3 / "summary.json"))["steps"],
            state3["mask_fixed_at"]);
  const auto g3 = gates_of(c, run3, dir / "scratch"), g4 = gates_of(c, run4, dir / "scratch");
  const auto g_solo = gates_of(c, dir / "solo3", dir / "scratch");
  for (const auto& [k, t] : g3) EXPECT_TRUE(torch::equal(t, g_solo.at(k))) << k.first << k.second;
  // The two seeds' gates differ (or the mean would test nothing).
  bool differ = false;
  for (const auto& [k, t] : g3) differ = differ || !torch::equal(t, g4.at(k));
  EXPECT_TRUE(differ);
  // The mask by hand: the mean P_open per head, the split by largest remainder (of the P_open at
  // or above `floor`: prune.split_floor), top per type.
  std::map<std::tuple<int, int, int>, double> mean;
  for (const auto& [k, t] : g3)
    for (int64_t h = 0; h < t.size(0); ++h)
      mean[{k.first, k.second, static_cast<int>(h)}] =
          (p_open_by_formula(t[h].item<double>()) + p_open_by_formula(g4.at(k)[h].item<double>())) /
          2;
  auto by_hand = [&](double floor) {
    double e[3] = {0, 0, 0};
    for (const auto& [h, m] : mean)
      if (m >= floor) e[std::get<0>(h)] += m;
    const auto counts = split_of_seven_by_hand(e);
    std::set<std::tuple<int, int, int>> removed;
    for (int t = 0; t < 3; ++t) {
      std::vector<std::pair<double, std::tuple<int, int, int>>> of_type;
      for (const auto& [h, m] : mean)
        if (std::get<0>(h) == t) of_type.push_back({m, h});
      std::sort(of_type.begin(), of_type.end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
      for (size_t i = counts[t]; i < of_type.size(); ++i) removed.insert(of_type[i].second);
    }
    return std::make_pair(removed, counts);
  };
  const auto [removed_by_hand, counts] = by_hand(0);
  // A run's removed heads, from its head_removal.csv (a kept head's removal step is empty).
  auto removed_by = [](const fs::path& run) {
    std::set<std::tuple<int, int, int>> removed;
    const auto csv = io::read_lines(run / "head_removal.csv");
    for (size_t i = 1; i < csv.size(); ++i) {
      if (csv[i].empty()) continue;
      std::stringstream line(csv[i]);
      std::string type, layer, head, step;
      std::getline(line, type, ',');
      std::getline(line, layer, ',');
      std::getline(line, head, ',');
      std::getline(line, step, ',');
      if (step.empty()) continue;
      const int t = type == "enc_self" ? 0 : type == "dec_self" ? 1 : 2;
      removed.insert({t, std::stoi(layer), std::stoi(head)});
    }
    return removed;
  };
  EXPECT_EQ(removed_by(dir / "avg"), removed_by_hand);
  // The mean's mask is neither seed's own (so taking one gate run's gates would fail here).
  EXPECT_EQ(removed_by(run3).size(), 17u);
  EXPECT_NE(removed_by(run3), removed_by_hand);
  EXPECT_NE(removed_by(run4), removed_by_hand);
  const auto arch = run::read_checkpoint_info(dir / "avg" / "pruned").architecture;
  EXPECT_EQ(arch.total(AttentionType::kEncSelf), counts[0]);
  EXPECT_EQ(arch.total(AttentionType::kDecSelf), counts[1]);
  EXPECT_EQ(arch.total(AttentionType::kEncDec), counts[2]);
  // The run: the mask fixed at step 0 (every evaluation with it), exactly 10 steps after it.
  const auto state = nlohmann::json::parse(
      io::read_file(dir / "avg" / "checkpoints" / "last" / "prune_state.json"));
  EXPECT_EQ(state["mask_fixed_at"].get<int64_t>(), 0) << state.dump();
  const auto evals = events(dir / "avg", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(evals.front()["step"].get<int64_t>(), 0);
  for (const auto& ev : evals) EXPECT_TRUE(ev.value("mask_fixed", false)) << ev.dump();
  EXPECT_EQ(nlohmann::json::parse(io::read_file(dir / "avg" / "summary.json"))["steps"], 10);
  EXPECT_NE(err.find("the gates are the mean P_open of 2 gate runs"), std::string::npos) << err;
  // The progress lines count to where each run ends at the latest: the gate runs to their latest
  // fixing point (train.max_steps 60 - recovery_steps 10), the run to its 10 recovery steps; none
  // to train.max_steps.
  EXPECT_NE(err.find("step 1/50 |"), std::string::npos) << err;
  EXPECT_NE(err.find("step 1/10 |"), std::string::npos) << err;
  EXPECT_EQ(err.find("/60 |"), std::string::npos) << err;
  // Run again: the gate runs are finished and not run again.
  ::testing::internal::CaptureStderr();
  prune::prune_command(avg, o);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(fmt::format("gate run {} has finished", run3.string())), std::string::npos)
      << err;
  EXPECT_EQ(nlohmann::json::parse(io::read_file(run4 / "summary.json"))["steps"],
            nlohmann::json::parse(io::read_file(run4 / "checkpoints" / "last" /
                                                "prune_state.json"))["mask_fixed_at"]);
  // prune.split_floor changes no gated step, only how the mean's total is split: a run with a
  // floor takes these finished gate runs as its own and keeps the mask the floor gives by hand
  // (here one that differs from the run without it).
  // (Here the mean's E[open] is 1.95/2.23/2.22, split 2/3/2; above 0.2 it is 1.95/2.03/2.04,
  // 2/2/3.)
  constexpr double kFloor = 0.2;
  Config floored = avg;
  floored.prune.split_floor = kFloor;
  const auto [removed_floored, counts_floored] = by_hand(kFloor);
  EXPECT_NE(counts_floored, counts);
  fs::create_directories(dir / "floor");
  fs::copy(dir / "avg" / "gate-seeds", dir / "floor" / "gate-seeds", fs::copy_options::recursive);
  train::TrainOptions of = o;
  of.run_dir = dir / "floor";
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(prune::prune_command(floored, of).interrupted);
  err = ::testing::internal::GetCapturedStderr();
  for (int seed : {3, 4})
    EXPECT_NE(err.find(fmt::format(
                  "gate run {} has finished",
                  (dir / "floor" / "gate-seeds" / fmt::format("seed-{}", seed)).string())),
              std::string::npos)
        << err;
  EXPECT_EQ(removed_by(dir / "floor"), removed_floored);
#ifdef HEADCOUNT_BINARY
  // `analyze compare --finetune` on this run: Michel's heads get the 10 steps that trained its
  // exported weights, by `train RUN/config.yaml` without the gate runs (the fine-tuning's config
  // failed the config check while it kept prune.gate_seeds).
  const auto cmp = testing::run_headcount(
      "", fmt::format("analyze compare --checkpoint {} --run {} --out {} --finetune --sentences 4",
                      c.prune.init_from, (dir / "avg").string(), (dir / "cmp").string()));
  ASSERT_EQ(cmp.code, 0) << cmp.err << io::read_file(dir / "cmp" / "michel-finetune.log");
  const fs::path tuned = dir / "cmp" / "michel-finetuned";
  EXPECT_EQ(
      nlohmann::json::parse(io::read_file(tuned / "checkpoints" / "last" / "state.json"))["step"],
      10);
  EXPECT_TRUE(load_config_file(tuned / "config.yaml").prune.gate_seeds.empty());
  EXPECT_FALSE(fs::exists(tuned / "gate-seeds"));
#endif
  // Clear errors: the recipe's settings are needed, and each seed once.
  Config no_exact = avg;
  no_exact.prune.exact_recovery = false;
  EXPECT_NE(load_error(no_exact).find("prune.gate_seeds (from bad"), std::string::npos)
      << load_error(no_exact);
  Config twice = avg;
  twice.prune.gate_seeds = {3, 3};
  EXPECT_NE(load_error(twice).find("lists seed 3 twice"), std::string::npos) << load_error(twice);
  Config stop = c;
  stop.prune.fix_at_target = false;
  stop.prune.exact_recovery = false;
  stop.prune.recovery_steps = 0;
  stop.prune.rewind = false;
  stop.prune.stop_at_fix = true;
  EXPECT_NE(load_error(stop).find("prune.stop_at_fix (from bad"), std::string::npos)
      << load_error(stop);
}

TEST(PruneRun, BadConfigsAreClearErrors) {
  TempDir dir;
  Config c = baseline(dir);
  auto error_of = [&](Config bad) {
    try {
      run_prune(bad, dir / "bad");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  Config big = c;
  big.prune.target_heads = 25;
  EXPECT_NE(error_of(big).find("larger than the number of gated heads (24)"), std::string::npos);
  Config missing = c;
  missing.prune.init_from = (dir / "nowhere").string();
  EXPECT_NE(error_of(missing).find("not found"), std::string::npos);
  Config other = c;
  other.model.d_model = 48;
  EXPECT_NE(error_of(other).find("model.d_model"), std::string::npos);
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

// Michel-style pruning: chosen heads physically removed from a checkpoint compute what the full
// model computes with those heads masked, and the result can be fine-tuned (`train --init-from`).
TEST(PruneRun, ExportWithoutHeadsEqualsMaskingAndFineTunes) {
  testing::TempDir dir;
  Config c = baseline(dir);
  const fs::path base = dir / "base" / "checkpoints" / "last";
  const std::vector<model::HeadId> removed = {{AttentionType::kEncSelf, 0, 1},
                                              {AttentionType::kEncDec, 1, 0},
                                              {AttentionType::kEncDec, 1, 1},
                                              {AttentionType::kEncDec, 1, 2},
                                              {AttentionType::kEncDec, 1, 3}};
  const auto arch = prune::export_without_heads(base, removed, dir / "michel");
  EXPECT_EQ(arch.enc_self, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(arch.dec_self, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(arch.enc_dec, (std::vector<int64_t>{4, 0}));
  // The full model with the same heads masked (head scale 0) gives the same logits.
  auto full = run::load_model(run::read_checkpoint_info(base), torch::kCPU);
  auto small = run::load_model(run::read_checkpoint_info(dir / "michel"), torch::kCPU);
  full->eval();
  small->eval();
  {
    torch::NoGradGuard ng;
    full->attention_layers(AttentionType::kEncSelf)[0]->set_head_scale(
        torch::tensor({1.0f, 0.0f, 1.0f, 1.0f}));
    full->attention_layers(AttentionType::kEncDec)[1]->set_head_scale(torch::zeros({4}));
    auto src = torch::randint(4, 30, {2, 6});
    auto tgt = torch::randint(4, 30, {2, 5});
    const auto a = full->forward(src, tgt), b = small->forward(src, tgt);
    EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max();
  }
  // Fine-tuning starts from it and keeps its architecture.
  c.train.max_steps = 10;
  c.train.eval_every = 10;
  train::TrainOptions o;
  o.run_dir = dir / "tuned";
  o.init_from = dir / "michel";
  train::train_command(c, o);
  EXPECT_EQ(run::read_checkpoint_info(dir / "tuned" / "checkpoints" / "last").architecture, arch);
  // A head the checkpoint does not have, and an existing output folder, are errors.
  EXPECT_NE(testing::error_of([&] {
              prune::export_without_heads(base, {{AttentionType::kDecSelf, 2, 0}}, dir / "x");
            }).find("has no dec_self layer 2 head 0"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              prune::export_without_heads(base, {}, dir / "michel");
            }).find("refusing to overwrite"),
            std::string::npos);
}

}  // namespace
}  // namespace headcount
