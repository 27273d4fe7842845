// Heads as word aligners (analysis/alignment.h): word-level attention, argmax alignment,
// precision / recall / AER and the fixed-offset baselines, by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "headcount/analysis/alignment.h"
#include "headcount/common/check.h"

namespace headcount::analysis {
namespace {

TEST(Alignment, PrecisionRecallAndAerByHand) {
  // Target words 0..3. Gold: 0 -> {0} sure; 1 -> {1, 2} possible; 2 -> none; 3 -> {3} sure and
  // {4} possible.
  const GoldAlignment gold(
      {{0, 0, true}, {1, 1, false}, {2, 1, false}, {3, 3, true}, {4, 3, false}}, 4);
  EXPECT_EQ(gold.sure_links, 2);
  EXPECT_TRUE(gold.linked(1));
  EXPECT_FALSE(gold.linked(2));
  // Predictions: 0 -> 0 (sure hit), 1 -> 2 (possible hit), 2 -> 0 (unlinked: not scored),
  // 3 -> 4 (possible hit, not sure).
  const auto c = score_alignment({0, 2, 0, 4}, gold);
  EXPECT_EQ(c.predicted, 3);
  EXPECT_EQ(c.hit_possible, 3);
  EXPECT_EQ(c.hit_sure, 1);
  EXPECT_EQ(c.sure, 2);
  EXPECT_DOUBLE_EQ(c.precision(), 1.0);
  EXPECT_DOUBLE_EQ(c.recall(), 0.5);
  EXPECT_DOUBLE_EQ(c.aer(), 1 - (1.0 + 3.0) / (3.0 + 2.0));
  // A miss and a word without a prediction.
  const auto d = score_alignment({1, -1, 0, 3}, gold);
  EXPECT_EQ(d.predicted, 2);
  EXPECT_EQ(d.hit_possible, 1);
  EXPECT_EQ(d.hit_sure, 1);
  EXPECT_DOUBLE_EQ(d.aer(), 1 - (1.0 + 1.0) / (2.0 + 2.0));
  auto sum = c;
  sum += d;
  EXPECT_EQ(sum.predicted, 5);
  EXPECT_EQ(sum.sure, 4);
  // Links outside the sentence are an error.
  EXPECT_THROW(GoldAlignment({{0, 4, true}}, 4), Error);
}

TEST(Alignment, OffsetAndDiagonalBaselines) {
  // Target words 0..2 aligned to source words 1..3 of 4: offset +1 is perfect.
  const GoldAlignment gold({{1, 0, true}, {2, 1, true}, {3, 2, true}}, 3);
  AlignBaseline b;
  b.max_offset = 2;
  b.add(gold, 4);
  EXPECT_EQ(b.offset.size(), 5u);
  EXPECT_DOUBLE_EQ(b.offset.at(1).precision(), 1.0);
  EXPECT_DOUBLE_EQ(b.offset.at(0).precision(), 0.0);
  // Offset -2 clips every prediction to source word 0: no hit.
  EXPECT_DOUBLE_EQ(b.offset.at(-2).precision(), 0.0);
  // +2 predicts 2, 3, 3 (clipped): one hit (3 for target 2).
  EXPECT_DOUBLE_EQ(b.offset.at(2).precision(), 1.0 / 3);
  // Diagonal: round(t * 4 / 3) = 0, 1, 3 -> one hit.
  EXPECT_DOUBLE_EQ(b.diagonal.precision(), 1.0 / 3);
  const auto [name, best] = b.best();
  EXPECT_EQ(name, "offset +1");
  EXPECT_DOUBLE_EQ(best.aer(), 0.0);
}

TEST(Alignment, WordAttentionAveragesTargetPiecesAndSumsSourcePieces) {
  // Target pieces: word 0 = pieces 0, 1; word 1 = piece 2. Source pieces: word 0 = pieces 0, 1;
  // word 1 = piece 2; piece 3 is EOS (-1).
  const auto w = torch::tensor({0.1, 0.2, 0.3, 0.4,  //
                                0.3, 0.0, 0.5, 0.2,  //
                                0.0, 0.1, 0.3, 0.6},
                               torch::kDouble)
                     .view({3, 4});
  const auto word = cross_word_attention(w, {0, 0, 1}, 2, {0, 0, 1, -1}, 2);
  // Word 0 row: mean of rows 0 and 1 = [0.2, 0.1, 0.4, 0.3] -> [0.3, 0.4]; word 1: [0.1, 0.3].
  const auto expected = torch::tensor({0.3, 0.4, 0.1, 0.3}, torch::kDouble).view({2, 2});
  EXPECT_TRUE(torch::allclose(word, expected, 1e-12, 1e-12)) << word;
  const auto best = align_argmax(word);
  EXPECT_EQ(best[0].item<int64_t>(), 1);
  EXPECT_EQ(best[1].item<int64_t>(), 1);
  // Leading dimensions (heads) pass through; a word without pieces gets no alignment.
  const auto heads = cross_word_attention(torch::stack({w, w}), {0, 0, 2}, 3, {0, 0, 1, -1}, 2);
  EXPECT_EQ(heads.sizes(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(align_argmax(heads)[1][1].item<int64_t>(), -1);
  EXPECT_THROW(cross_word_attention(w, {0, 0}, 1, {0, 0, 1, -1}, 2), Error);
}

}  // namespace
}  // namespace headcount::analysis
