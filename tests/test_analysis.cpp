// Head analysis metrics on tiny hand-made attention matrices with hand-computed answers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tensor_util.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "headcount/analysis/head_stats.h"

namespace headcount::analysis {
namespace {

using testing::mat;

TEST(HeadStats, ConfidenceEntropyEosAndNeighbours) {
  HeadStats h;
  SentenceKeys k;
  k.eos = 2;
  k.self = true;
  h.add(mat({{0.5, 0.25, 0.25}, {0.1, 0.8, 0.1}, {0.0, 0.0, 1.0}}), k);
  EXPECT_DOUBLE_EQ(h.tokens, 3);
  // Maximum over keys other than EOS: 0.5, 0.8, 0.
  EXPECT_NEAR(h.confidence(), (0.5 + 0.8 + 0.0) / 3, 1e-12);
  const double e0 = -(0.5 * std::log(0.5) + 2 * 0.25 * std::log(0.25));
  const double e1 = -(2 * 0.1 * std::log(0.1) + 0.8 * std::log(0.8));
  EXPECT_NEAR(h.entropy(), (e0 + e1 + 0.0) / 3, 1e-12);
  EXPECT_NEAR(h.attention_to_eos(), (0.25 + 0.1 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(h.attention_prev(), (0.1 + 0.0) / 3, 1e-12);
  EXPECT_NEAR(h.attention_same(), (0.5 + 0.8 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(h.attention_next(), (0.25 + 0.1) / 3, 1e-12);
  // Every maximum on the diagonal: offset 0 for all three tokens.
  EXPECT_EQ(h.top_offset(), (std::pair<int64_t, double>{0, 1.0}));
}

TEST(HeadStats, PositionalHeadNeedsNinetyPercentAtOneOffset) {
  // 20 tokens: every token but the first attends mostly to the previous one.
  auto w = torch::full({20, 20}, 0.01, torch::kDouble);
  for (int64_t i = 0; i < 20; ++i) w[i][i == 0 ? 0 : i - 1] = 0.81;
  HeadStats h;
  h.add(w, SentenceKeys{});
  EXPECT_EQ(h.top_offset().first, -1);
  EXPECT_NEAR(h.top_offset().second, 19.0 / 20, 1e-12);
  EXPECT_TRUE(h.positional());
  // A second sentence of 5 tokens attending to themselves: 19 of 25 = 0.76 at -1.
  auto s = torch::eye(5, torch::kDouble);
  h.add(s, SentenceKeys{});
  EXPECT_NEAR(h.top_offset().second, 19.0 / 25, 1e-12);
  EXPECT_FALSE(h.positional());
  // Not self-attention: no offsets, no neighbours.
  HeadStats cross;
  SentenceKeys k;
  k.self = false;
  cross.add(w, k);
  EXPECT_EQ(cross.top_offset().second, 0.0);
  EXPECT_EQ(cross.attention_prev(), 0.0);
}

TEST(HeadStats, FunctionsFollowVoitasThresholds) {
  // Set by hand: 95 of 100 maxima at offset -1 (positional), 40 of 100 on the rarest key.
  HeadStats h;
  h.tokens = h.self_tokens = 100;
  h.argmax_offsets = {{-1, 95}, {0, 5}};
  h.rare_tokens = 100;
  h.rare_hits = 40;
  auto f = analysis::head_functions(h, true);
  EXPECT_TRUE(f.positional);
  EXPECT_FALSE(f.rare_token);
  EXPECT_EQ(f.label(), "positional");
  // Not in self-attention: not positional. At offset 0 (attending to itself) 95% of the time: one
  // fixed relative position too (METHODS.md section 5).
  EXPECT_FALSE(analysis::head_functions(h, false).positional);
  HeadStats same = h;
  same.argmax_offsets = {{0, 95}, {1, 5}};
  EXPECT_TRUE(analysis::head_functions(same, true).positional);
  // 89% at one offset is not enough; half the maxima on the rarest key is rare-token.
  h.argmax_offsets = {{-1, 89}, {1, 11}};
  h.rare_hits = 50;
  f = analysis::head_functions(h, true, /*syntactic=*/true);
  EXPECT_FALSE(f.positional);
  EXPECT_TRUE(f.rare_token);
  EXPECT_EQ(f.label(), "syntactic+rare-token");
  EXPECT_EQ(analysis::head_functions(HeadStats{}, true).label(), "none");
}

TEST(HeadStats, RareTokenHitsCountOnlySentencesWithARareKey) {
  HeadStats h;
  SentenceKeys k;
  k.eos = 3;
  k.rank = {3, 900, 10, 0};  // key 1 is the rarest (rank 900), beyond the top 500
  k.exclude_top = 500;
  h.add(mat({{0.1, 0.7, 0.1, 0.1}, {0.6, 0.2, 0.1, 0.1}}), k);
  EXPECT_DOUBLE_EQ(h.rare_tokens, 2);
  EXPECT_DOUBLE_EQ(h.rare_fraction(), 0.5);
  // A sentence whose rarest key is among the 500 most frequent does not count.
  k.rank = {3, 400, 10, 0};
  h.add(mat({{0.1, 0.7, 0.1, 0.1}, {0.1, 0.7, 0.1, 0.1}}), k);
  EXPECT_DOUBLE_EQ(h.rare_tokens, 2);
  // EOS is never the rare token, however rare its id.
  k.rank = {3, 600, 10, 5000};
  h.add(mat({{0.1, 0.1, 0.1, 0.7}}), k);
  EXPECT_DOUBLE_EQ(h.rare_tokens, 3);
  EXPECT_DOUBLE_EQ(h.rare_hits, 1);
}

// The decoder's self-attention (causal, BOS the special key at 0): its first query sees BOS alone
// and has no confidence to count, and a query before the rarest key cannot hit it.
TEST(HeadStats, CausalQueriesCountOnlyWhatTheySee) {
  HeadStats h;
  SentenceKeys k;
  k.eos = 0;
  k.causal = true;
  k.rank = {0, 10, 900, 20};  // key 2 is the rarest
  k.exclude_top = 500;
  h.add(mat({{1, 0, 0, 0}, {0.4, 0.6, 0, 0}, {0.2, 0.1, 0.7, 0}, {0.1, 0.2, 0.3, 0.4}}), k);
  EXPECT_DOUBLE_EQ(h.tokens, 4);
  // Confidence over queries 1-3: (0.6 + 0.7 + 0.4) / 3.
  EXPECT_NEAR(h.confidence(), (0.6 + 0.7 + 0.4) / 3, 1e-12);
  // Rare: queries 2 and 3 see key 2; query 2's maximum is on it.
  EXPECT_DOUBLE_EQ(h.rare_tokens, 2);
  EXPECT_DOUBLE_EQ(h.rare_hits, 1);
  // Without the causal flag (an encoder's view of the same matrix) every query counts.
  HeadStats all;
  k.causal = false;
  all.add(mat({{1, 0, 0, 0}, {0.4, 0.6, 0, 0}, {0.2, 0.1, 0.7, 0}, {0.1, 0.2, 0.3, 0.4}}), k);
  EXPECT_NEAR(all.confidence(), (0 + 0.6 + 0.7 + 0.4) / 4, 1e-12);
  EXPECT_DOUBLE_EQ(all.rare_tokens, 4);
}

TEST(HeadSimilarity, JensenShannonByHand) {
  // Disjoint supports: ln 2 per row.
  EXPECT_NEAR(js_divergence(mat({{1, 0}, {0, 1}}), mat({{0, 1}, {1, 0}})), 2 * std::log(2.0),
              1e-12);
  EXPECT_NEAR(js_divergence(mat({{0.3, 0.7}}), mat({{0.3, 0.7}})), 0.0, 1e-12);
  // p = (1/2, 1/2), q = (1, 0), m = (3/4, 1/4).
  const double kl_pm = 0.5 * std::log(0.5 / 0.75) + 0.5 * std::log(0.5 / 0.25);
  const double kl_qm = std::log(1 / 0.75);
  EXPECT_NEAR(js_divergence(mat({{0.5, 0.5}}), mat({{1, 0}})), 0.5 * (kl_pm + kl_qm), 1e-12);
  // The pairwise matrix agrees with the pair function, is symmetric, zero on the diagonal.
  torch::manual_seed(3);
  const auto heads = torch::softmax(torch::randn({4, 3, 5}, torch::kDouble), -1);
  const auto m = pairwise_js(heads);
  for (int64_t a = 0; a < 4; ++a) {
    EXPECT_NEAR(m[a][a].item<double>(), 0.0, 1e-12);
    for (int64_t b = 0; b < 4; ++b) {
      EXPECT_NEAR(m[a][b].item<double>(), js_divergence(heads[a], heads[b]), 1e-12);
      EXPECT_NEAR(m[a][b].item<double>(), m[b][a].item<double>(), 1e-12);
    }
  }
}

TEST(HeadSimilarity, ClassicalMdsRecoversAKnownConfiguration) {
  // The corners of a 3 x 4 rectangle: MDS in 2-D gives back every distance (up to rotation).
  const double pts[4][2] = {{0, 0}, {3, 0}, {0, 4}, {3, 4}};
  auto d = torch::zeros({4, 4}, torch::kDouble);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) d[a][b] = std::hypot(pts[a][0] - pts[b][0], pts[a][1] - pts[b][1]);
  const auto x = classical_mds(d, 2);
  ASSERT_EQ(x.sizes(), (std::vector<int64_t>{4, 2}));
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      EXPECT_NEAR((x[a] - x[b]).norm().item<double>(), d[a][b].item<double>(), 1e-9);
  // Centred at the origin, the larger spread (4) on the first axis.
  EXPECT_NEAR(x.sum(0).abs().max().item<double>(), 0.0, 1e-9);
  EXPECT_NEAR(x.select(1, 0).abs().max().item<double>(), 2.0, 1e-9);
  EXPECT_NEAR(x.select(1, 1).abs().max().item<double>(), 1.5, 1e-9);
}

}  // namespace
}  // namespace headcount::analysis

namespace headcount::analysis {
namespace {

TEST(RankCorrelation, SpearmanByHandWithTies) {
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-12);
  // x ranks (0, 1.5, 1.5, 3), y ranks (0, 1, 2, 3): 4.5 / sqrt(4.5 * 5).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 4.5 / std::sqrt(4.5 * 5), 1e-12);
  EXPECT_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0.0);
}

}  // namespace
}  // namespace headcount::analysis

// ---- The analyzer on a tiny trained model ----

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "headcount/analysis/analyzer.h"
#include "headcount/analysis/compare.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/data/batching.h"
#include "headcount/data/links.h"
#include "headcount/data/vocab.h"
#include "headcount/model/loss.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/run_folder.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount::analysis {
namespace {

using model::AttentionType;

fs::path tiny_model(const testing::TempDir& dir) {
  return train_tiny_model(dir, 300);
}

// Dev sentence `s` of a checkpoint's corpus alone in a batch, for computing a score by hand.
data::Batch dev_sentence(const run::CheckpointInfo& info, size_t s) {
  const auto corpus = data::load_corpus(info.config.data);
  data::ParallelText one;
  one.src = {corpus.dev.src.at(s)};
  one.tgt = {corpus.dev.tgt.at(s)};
  const auto ex = data::encode_pairs(one, data::Vocab::load(info.vocab.src_model),
                                     data::Vocab::load(info.vocab.tgt_model), 1000);
  return data::collate(ex, {0}, torch::kCPU);
}

// I_h against central finite differences of the loss in each (token, head) multiplier: the
// definition (absolute value per token, summed, divided by the tokens) computed another way.
TEST(Importance, MatchesFiniteDifferencesPerToken) {
  testing::TempDir dir;
  const auto ckpt = tiny_model(dir);
  AnalyzeOptions o;
  o.checkpoint = ckpt;
  o.sentences = 1;
  Analyzer an(o);
  const auto scores = an.importance(false);
  const auto& heads = an.heads();
  ASSERT_EQ(heads.size(), 6u);  // 2 heads in each of the three attention layers

  // The same sentence, by hand.
  const auto info = run::read_checkpoint_info(ckpt);
  auto m = run::load_model(info, torch::kCPU);
  m->eval();
  const auto b = dev_sentence(info, 0);
  const int64_t S = b.src.size(1), T = b.tgt_in.size(1);
  auto loss_with = [&](AttentionType type, int64_t token, int64_t head, double value) {
    torch::NoGradGuard no_grad;
    auto layer = m->attention_layers(type)[0];
    auto scale = torch::ones({1, type == AttentionType::kEncSelf ? S : T, 2});
    scale[0][token][head] = value;
    layer->set_head_scale(scale);
    const auto logits = m->forward(b.src, b.tgt_in);
    layer->set_head_scale({});
    const auto ls = model::label_smoothed_loss(logits, b.tgt_out, 0.0);
    return ls.nll.item<double>();  // L: the sentence's summed negative log-likelihood
  };
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto& h = heads[i];
    const int64_t n = h.type == AttentionType::kEncSelf ? S : T;
    double sum = 0;
    for (int64_t t = 0; t < n; ++t) {
      const double eps = 1e-2;
      sum +=
          std::abs(loss_with(h.type, t, h.head, 1 + eps) - loss_with(h.type, t, h.head, 1 - eps)) /
          (2 * eps);
    }
    EXPECT_NEAR(scores[i], sum / n, 5e-3 * std::max(0.05, sum / n)) << h.label();
  }
  // Layer normalisation divides each layer's scores by their L2 norm.
  const auto norm = an.importance(true);
  const double l2 = std::hypot(scores[0], scores[1]);
  EXPECT_NEAR(norm[0], scores[0] / l2, 1e-9);
  EXPECT_NEAR(norm[1], scores[1] / l2, 1e-9);
}

// The other two units against finite differences too: one multiplier per head shared by all of a
// sentence's tokens, each sentence on its own. Per sentence: the mean over the sentences of
// |dL_s/dxi_h|; over the split: minus the mean of dL_s/dxi_h, signed.
TEST(Importance, PerSentenceAndSplitMatchFiniteDifferencesPerSentence) {
  testing::TempDir dir;
  const auto ckpt = tiny_model(dir);
  AnalyzeOptions o;
  o.checkpoint = ckpt;
  o.sentences = 3;
  o.batch_sentences = 2;  // one padded batch of two and one of one
  Analyzer an(o);
  const auto per_sentence = an.importance(false, ImportanceUnit::kSentence);
  const auto split = an.importance(false, ImportanceUnit::kSplit);
  const auto& heads = an.heads();
  ASSERT_EQ(heads.size(), 6u);

  const auto info = run::read_checkpoint_info(ckpt);
  auto m = run::load_model(info, torch::kCPU);
  m->eval();
  std::vector<double> abs_mean(heads.size(), 0.0), signed_mean(heads.size(), 0.0);
  for (int s = 0; s < 3; ++s) {
    const auto b = dev_sentence(info, s);
    auto loss_with = [&](AttentionType type, int64_t head, double value) {
      torch::NoGradGuard no_grad;
      auto layer = m->attention_layers(type)[0];
      auto scale = torch::ones({2});
      scale[head] = value;
      layer->set_head_scale(scale);
      const auto logits = m->forward(b.src, b.tgt_in);
      layer->set_head_scale({});
      return model::label_smoothed_loss(logits, b.tgt_out, 0.0).nll.item<double>();
    };
    for (size_t i = 0; i < heads.size(); ++i) {
      // A smaller step than per token: a whole sentence's multiplier moves the loss more, and the
      // central difference's error grows with its third derivative.
      const double eps = 2e-3;
      const double d = (loss_with(heads[i].type, heads[i].head, 1 + eps) -
                        loss_with(heads[i].type, heads[i].head, 1 - eps)) /
                       (2 * eps);
      abs_mean[i] += std::abs(d) / 3;
      signed_mean[i] -= d / 3;
    }
  }
  for (size_t i = 0; i < heads.size(); ++i) {
    EXPECT_NEAR(per_sentence[i], abs_mean[i], 5e-3 * std::max(0.05, abs_mean[i]))
        << heads[i].label();
    // The signed mean can cancel: its error is that of the sentences' magnitudes.
    EXPECT_NEAR(split[i], signed_mean[i], 5e-3 * std::max(0.05, abs_mean[i])) << heads[i].label();
  }
  EXPECT_THROW(importance_unit_from("batch"), Error);
}

// The expectation over tokens does not depend on the batching: the same sentences one per batch and
// all in one batch (padded) give the same scores.
TEST(Importance, DoesNotDependOnHowTheSentencesAreBatched) {
  testing::TempDir dir;
  const auto ckpt = tiny_model(dir);
  std::vector<double> scores[2];
  for (int i = 0; i < 2; ++i) {
    AnalyzeOptions o;
    o.checkpoint = ckpt;
    o.sentences = 6;
    o.batch_sentences = i == 0 ? 1 : 6;
    scores[i] = Analyzer(o).importance(false);
  }
  ASSERT_EQ(scores[0].size(), scores[1].size());
  for (size_t h = 0; h < scores[0].size(); ++h)
    EXPECT_NEAR(scores[0][h], scores[1][h], 1e-4 * std::max(1e-3, scores[0][h])) << h;
}

TEST(Analyzer, BleuMatchesEvalAndMaskingEverythingHurts) {
  testing::TempDir dir;
  const auto ckpt = tiny_model(dir);
  AnalyzeOptions o;
  o.checkpoint = ckpt;
  o.sentences = 0;
  Analyzer an(o);
  const double full = an.bleu({});
  // BLEU of `headcount eval` (greedy, dev) with extra arguments.
  const auto eval_bleu = [&](const std::string& extra, const std::string& name) {
    const auto out = dir / name;
    EXPECT_EQ(std::system(fmt::format("{} eval --checkpoint {} --split dev --beam 1 {} --out {} "
                                      ">/dev/null 2>&1",
                                      HEADCOUNT_BINARY, ckpt.string(), extra, out.string())
                              .c_str()),
              0);
    return nlohmann::json::parse(io::read_file(out))["scores"]["ref1"]["bleu"].get<double>();
  };
  EXPECT_DOUBLE_EQ(full, eval_bleu("", "e.json"));
  EXPECT_LT(an.bleu(an.heads()), full);
  // Masks do not leak into the next call.
  EXPECT_DOUBLE_EQ(an.bleu({}), full);
  // --set overrides the checkpoint's config as eval's does: outputs cut to one token score what
  // eval scores with the same override, below the full outputs; an unknown key names itself.
  {
    AnalyzeOptions cut = o;
    cut.sets = {"decode.max_len_offset=1", "decode.max_len_ratio=0", "threads.intra_op=1"};
    const double short_bleu = Analyzer(cut).bleu({});
    EXPECT_DOUBLE_EQ(
        short_bleu,
        eval_bleu("--set decode.max_len_offset=1 --set decode.max_len_ratio=0", "c.json"));
    EXPECT_LT(short_bleu, full);
    AnalyzeOptions bad = o;
    bad.sets = {"decode.beams=2"};
    try {
      Analyzer a(bad);
      ADD_FAILURE() << "an unknown key was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("decode.beams"), std::string::npos) << e.what();
    }
  }
  // Statistics exist for every head and are distributions' statistics.
  const auto stats = an.head_stats();
  ASSERT_EQ(stats.size(), an.heads().size());
  for (const auto& s : stats) {
    EXPECT_GT(s.tokens, 0);
    EXPECT_GT(s.confidence(), 0);
    EXPECT_LE(s.confidence(), 1 + 1e-6);
    EXPECT_GE(s.entropy(), 0);
  }
  const auto js = an.js_distances(AttentionType::kEncSelf);
  ASSERT_EQ(js.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_NEAR(js[0][0].item<double>(), 0.0, 1e-9);
  EXPECT_GT(js[0][1].item<double>(), 0.0);
  // LRP relevance: per layer (two heads each here) the shares are a partition of the layer's.
  const auto rel = an.relevance(0.01);
  ASSERT_EQ(rel.share.size(), 6u);
  for (size_t i = 0; i < 6; i += 2) {
    EXPECT_EQ(an.heads()[i].layer, an.heads()[i + 1].layer);
    EXPECT_NEAR(rel.share[i] + rel.share[i + 1], 1.0, 1e-9) << an.heads()[i].label();
    EXPECT_NEAR(rel.token_share[i] + rel.token_share[i + 1], 1.0, 1e-9) << an.heads()[i].label();
    EXPECT_NEAR(rel.share[i], rel.raw[i] / (rel.raw[i] + rel.raw[i + 1]), 1e-9);
  }
  EXPECT_GT(rel.sentences, 0);
  EXPECT_GT(rel.tokens, rel.sentences);
  EXPECT_TRUE(std::isfinite(rel.source_share) && std::isfinite(rel.reached_inputs));
}

// `analyze compare` against a hand-written removal log: Michel et al.'s heads are the least
// important of each type, as many per type as L0 removed; the BLEU figures are the analyzer's for
// those masks; Spearman is over the gated heads against their removal steps (kept heads last).
TEST(Analyzer, CompareWithImportanceFollowsTheRemovalLog) {
  testing::TempDir dir;
  const auto ckpt = tiny_model(dir);
  AnalyzeOptions o;
  o.checkpoint = ckpt;
  o.sentences = 0;
  Analyzer an(o);
  const auto heads = an.heads();
  const auto imp = an.importance(false);
  ASSERT_EQ(heads.size(), 6u);
  // enc_self head 1 removed at step 20, dec_self head 0 and enc_dec head 1 at step 40.
  auto removed_at = [](const HeadId& h) -> std::optional<int64_t> {
    if (h.type == AttentionType::kEncSelf && h.head == 1) return 20;
    if (h.type == AttentionType::kDecSelf && h.head == 0) return 40;
    if (h.type == AttentionType::kEncDec && h.head == 1) return 40;
    return std::nullopt;
  };
  const fs::path run_dir = dir / "run";
  fs::create_directories(run_dir);
  std::vector<run::HeadRemoval> rows;
  std::vector<HeadId> l0_removed;
  std::vector<double> steps;
  for (const auto& h : heads) {
    run::HeadRemoval r;
    r.head = h;
    r.removal_step = removed_at(h);
    r.p_open = 0.5;
    r.gate = r.removal_step ? 0.0 : 1.0;
    if (r.removal_step) {
      r.dev_bleu = 1.0;
      l0_removed.push_back(h);
    }
    steps.push_back(r.removal_step ? static_cast<double>(*r.removal_step) : 41.0);
    rows.push_back(r);
  }
  run::write_head_removal(run::RunFolder{run_dir}.head_removal(), rows, run::HeadRemovalKind::kL0);
  // The run's method, as its config names it, goes into compare.json and the printout's labels.
  Config run_config = run::read_checkpoint_info(ckpt).config;  // the model it pruned
  run_config.prune.method = PruneMethod::kFisher;
  run_config.prune.target_heads = 3;
  save_config(run_config, run::RunFolder{run_dir}.config());
  // Michel: the lower-importance head of each type (one removed per type).
  std::vector<HeadId> michel;
  for (size_t i = 0; i < heads.size(); i += 2) {
    ASSERT_EQ(heads[i].type, heads[i + 1].type);
    michel.push_back(imp[i] <= imp[i + 1] ? heads[i] : heads[i + 1]);
  }
  CompareOptions c;
  c.run = run_dir;
  c.out = dir / "compare";
  c.export_michel = true;
  const auto r = compare_l0_with_importance(o, c);
  EXPECT_EQ(r.gated, 6u);
  EXPECT_EQ(r.removed, 3u);
  EXPECT_EQ(r.method, PruneMethod::kFisher);
  auto sorted = [](std::vector<HeadId> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(r.michel_removed), sorted(michel));
  EXPECT_DOUBLE_EQ(r.bleu_full, an.bleu({}));
  EXPECT_DOUBLE_EQ(r.bleu_l0_masked, an.bleu(l0_removed));
  EXPECT_DOUBLE_EQ(r.bleu_michel_masked, an.bleu(michel));
  EXPECT_NEAR(r.spearman_importance, spearman(imp, steps), 1e-12);
  EXPECT_FALSE(r.bleu_l0_tuned.has_value());  // no pruned/ in the run
  EXPECT_FALSE(r.bleu_michel_tuned.has_value());
  const auto j = nlohmann::json::parse(io::read_file(run::RunFolder{c.out}.compare()));
  EXPECT_EQ(j["removed_heads"], 3);
  EXPECT_EQ(j["method"], "fisher");
  EXPECT_DOUBLE_EQ(j["bleu_michel_same_counts_masked_no_finetuning"].get<double>(),
                   r.bleu_michel_masked);
  EXPECT_TRUE(j["bleu_l0_pruned_checkpoint_finetuned"].is_null());
  EXPECT_EQ(j["michel_removed_heads"].size(), 3u);
  // Michel's pruned model, physically one head fewer in each type's layer.
  const auto michel_info = run::read_checkpoint_info(c.out / "michel-pruned");
  for (auto t : {AttentionType::kEncSelf, AttentionType::kDecSelf, AttentionType::kEncDec})
    EXPECT_EQ(michel_info.architecture.total(t), 1) << model::attention_name(t);

  // A run that started from another checkpoint here: its removal order is of that model's heads.
  fs::create_directories(dir / "other");
  run_config.prune.init_from = (dir / "other").string();
  save_config(run_config, run::RunFolder{run_dir}.config());
  const std::string e =
      testing::error_of([&] { read_removal_order(run_dir, heads, ckpt.string()); });
  EXPECT_NE(e.find("started from " + (dir / "other").string() +
                   " (its prune.init_from), not from " + ckpt.string()),
            std::string::npos)
      << e;
  // The run's own start, but a model of another shape in its config: another model.
  run_config.prune.init_from = ckpt.string();
  run_config.model.d_model *= 2;
  save_config(run_config, run::RunFolder{run_dir}.config());
  const std::string shape =
      testing::error_of([&] { read_removal_order(run_dir, heads, ckpt.string()); });
  EXPECT_NE(shape.find("pruned a model of another shape"), std::string::npos) << shape;
}

// Heads as aligners against given gold links, through the library and the command.
TEST(Analyzer, AlignmentAgainstGoldLinksAndItsCommand) {
  testing::TempDir dir;
  const auto ckpt = tiny_model(dir);
  const auto es = io::read_lines(dir / "dev.es"), en = io::read_lines(dir / "dev.en");
  // Gold: target word t linked (sure) to source word min(t, last).
  std::vector<std::vector<data::WordLink>> gold;
  std::vector<std::string> lines;
  for (size_t i = 0; i < es.size(); ++i) {
    const auto ns = static_cast<int32_t>(text::split(es[i], ' ').size());
    const auto nt = static_cast<int32_t>(text::split(en[i], ' ').size());
    std::vector<data::WordLink> g;
    for (int32_t t = 0; t < nt; ++t) g.push_back({std::min(t, ns - 1), t, true});
    lines.push_back(data::format_links(g));
    gold.push_back(std::move(g));
  }
  AnalyzeOptions o;
  o.checkpoint = ckpt;
  o.sentences = 0;
  Analyzer an(o);
  const auto r = an.alignment(en, gold);
  EXPECT_EQ(r.sentences + r.unmatched, static_cast<int64_t>(es.size()));
  ASSERT_GT(r.sentences, 0);
  ASSERT_EQ(r.heads.size(), 2u);
  EXPECT_EQ(r.linked_words, r.target_words);
  // One prediction per linked word; one sure link per word, so precision equals recall.
  for (const auto* conv : {&r.predict, &r.input, &r.layer_predict, &r.layer_input}) {
    for (const auto& c : *conv) {
      EXPECT_EQ(c.predicted, static_cast<double>(r.linked_words));
      EXPECT_EQ(c.sure, static_cast<double>(r.linked_words));
      EXPECT_DOUBLE_EQ(c.precision(), c.recall());
      EXPECT_GE(c.precision(), 0.0);
      EXPECT_LE(c.precision(), 1.0);
    }
  }
  EXPECT_EQ(r.baseline.offset.at(0).precision(), r.baseline.offset.at(0).recall());
  // The command, with the same links.
  io::write_lines_atomic(dir / "dev.gold", lines);
  const auto out = dir / "align";
  ASSERT_EQ(std::system(fmt::format("{} analyze align --checkpoint {} --target web --links {} "
                                    "--sentences 0 --out {} >/dev/null 2>&1",
                                    HEADCOUNT_BINARY, ckpt.string(), (dir / "dev.gold").string(),
                                    out.string())
                            .c_str()),
            0);
  const auto j = nlohmann::json::parse(io::read_file(out / "align.json"));
  EXPECT_EQ(j["sentences"], r.sentences);
  EXPECT_NEAR(j["best_head"]["precision"].get<double>(),
              std::max({r.predict[0].precision(), r.predict[1].precision(), r.input[0].precision(),
                        r.input[1].precision()}),
              1e-12);
  EXPECT_EQ(io::read_lines(out / "align.csv").size(), 3u);
  EXPECT_EQ(io::read_lines(out / "align_layers.csv").size(), 2u);
  // Without links (the tiny corpus has none): a clear error naming the file it looked for.
  const auto err = dir / "err.txt";
  EXPECT_NE(std::system(fmt::format("{} analyze align --checkpoint {} --out {} >/dev/null 2>{}",
                                    HEADCOUNT_BINARY, ckpt.string(), out.string(), err.string())
                            .c_str()),
            0);
  EXPECT_NE(io::read_file(err).find("dev.kjv.links: no gold word links"), std::string::npos)
      << io::read_file(err);
}

}  // namespace
}  // namespace headcount::analysis
