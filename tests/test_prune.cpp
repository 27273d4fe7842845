// Gated models and their physically pruned counterparts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "headcount/common/check.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/prune/head_gates.h"

namespace headcount {
namespace {

using model::AttentionType;

ModelConfig small_config() {
  ModelConfig c;
  c.d_model = 32;
  c.ffn_dim = 64;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.heads = 4;
  c.dropout = 0.0;
  return c;
}

TEST(PruneHeads, PrunedModelComputesWhatTheGatedModelDoes) {
  torch::manual_seed(7);
  auto c = small_config();
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
  auto c = small_config();
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
}

}  // namespace
}  // namespace headcount
