// The analyses' record files: relevance.json byte for byte as `analyze relevance` has always
// written it, and compare.json and heads.csv read back through their readers.
#include <gtest/gtest.h>

#include <cmath>

#include "headcount/analysis/compare.h"
#include "headcount/analysis/head_table.h"
#include "headcount/analysis/heads_report.h"
#include "headcount/analysis/relevance_report.h"
#include "headcount/analysis/summaries.h"
#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "test_util.h"

namespace headcount::analysis {
namespace {

using model::AttentionType;

// Michel's fine-tuning (--finetune) gets the steps that trained the run's exported weights: all of
// train.max_steps unless the run rewound its weights when it fixed its mask; the assignments that
// say so load on top of the run's config as `train RUN/config.yaml --set ...` loads them.
TEST(AnalysisRecords, MichelFinetuneBudgetIsTheStepsThatTrainedTheExportedWeights) {
  // `train RUN/config.yaml` with finetune_sets: it loads, and trains `steps` steps
  const auto michel_steps = [&](const ConfigLoader& run, int64_t fixed_at) {
    ConfigLoader l = run;
    for (const auto& s : finetune_sets(run.finish(), fixed_at)) l.apply_set(s);
    const Config c = l.finish();
    EXPECT_FALSE(c.prune.rewind);
    EXPECT_TRUE(c.prune.gate_seeds.empty());  // no gate runs before Michel's fine-tuning
    EXPECT_EQ(finetune_budget(run.finish(), fixed_at), c.train.max_steps);
    return c.train.max_steps;
  };
  const std::vector<std::string> base = {"bible-base.yaml", "bible-prune.yaml"};
  // the gated steps alone (the reference protocol): all 1,200
  const auto gated =
      testing::repo_configs({"bible-base.yaml", "bible-prune.yaml", "bible-prune-gated.yaml"}, {});
  EXPECT_TRUE(finetune_sets(gated.finish()).empty());
  EXPECT_EQ(michel_steps(gated, -1), 1200);
  // recovery without rewind: the gated steps trained the weights too
  EXPECT_EQ(michel_steps(testing::repo_configs(base, {"prune.rewind=false"}), 1200), 3600);
  // lambda mode's recipe (mask fixed at 3,600 - 2,400): the 2,400 rewound steps
  EXPECT_EQ(michel_steps(testing::repo_configs(base, {}), 1200), 2400);
  // target mode's recipe, which ends 2,400 steps after the fixing step wherever it came
  const auto target =
      testing::repo_configs({"bible-base.yaml", "bible-prune.yaml", "bible-prune-target.yaml"},
                            {"prune.target_heads=72"});
  EXPECT_EQ(michel_steps(target, 456), 2400);
  // its default three gate seeds fix the mean's mask at step 0: the same 2,400
  EXPECT_FALSE(target.finish().prune.gate_seeds.empty());
  EXPECT_EQ(michel_steps(target, 0), 2400);
  // fixed at the target without exact recovery: from the fixing step to train.max_steps
  const auto rewind =
      testing::repo_configs(base, {"prune.target_heads=72", "prune.fix_at_target=true",
                                   "prune.recovery_steps=600", "train.max_steps=1200"});
  EXPECT_EQ(michel_steps(rewind, 487), 713);
  EXPECT_EQ(michel_steps(rewind, -1), 600);  // the fixing step unknown: the least it can be
}

TEST(AnalysisRecords, RelevanceJsonKeepsItsKeyOrderAndNulls) {
  testing::TempDir dir;
  RelevanceRecord r;
  r.checkpoint = "ck";
  r.split = "dev";
  r.sentences = 2;
  r.target_tokens = 10;
  r.epsilon = 0.01;
  r.source_share = 0.5;
  r.reached_embeddings = 0.25;
  r.vs_confidence.all = 0.5;
  r.vs_confidence.by_type[static_cast<int>(AttentionType::kEncDec)] = 1.0;
  r.run = "r";
  r.vs_removal_step.all = -0.5;
  r.kept_vs_removed.push_back({AttentionType::kEncSelf, 1, 2, 0.25, std::nullopt});
  const auto file = AnalysisFolder{dir.path()}.relevance();
  write_relevance_record(file, r);
  const std::string nulls = "    \"enc_self\": null,\n    \"dec_self\": null,\n";
  EXPECT_EQ(io::read_file(file),
            "{\n  \"checkpoint\": \"ck\",\n  \"split\": \"dev\",\n  \"sentences\": 2,\n"
            "  \"target_tokens\": 10,\n  \"epsilon\": 0.01,\n"
            "  \"source_share_of_input_relevance\": 0.5,\n"
            "  \"top_logit_share_reaching_embeddings\": 0.25,\n"
            "  \"spearman_relevance_vs_confidence\": {\n    \"all\": 0.5,\n" +
                nulls + "    \"enc_dec\": 1.0\n  },\n" +
                "  \"spearman_relevance_vs_importance\": {\n    \"all\": null,\n" + nulls +
                "    \"enc_dec\": null\n  },\n  \"run\": \"r\",\n" +
                "  \"spearman_relevance_vs_removal_step\": {\n    \"all\": -0.5,\n" + nulls +
                "    \"enc_dec\": null\n  },\n" +
                "  \"kept_vs_removed\": {\n    \"enc_self\": {\n      \"kept\": 1,\n"
                "      \"removed\": 2,\n      \"mean_relevance_kept\": 0.25,\n"
                "      \"mean_relevance_removed\": null\n    }\n  }\n}\n");
  const auto back = read_relevance_record(file);
  EXPECT_EQ(back.vs_removal_step.all, -0.5);
  EXPECT_FALSE(back.vs_importance.all.has_value());
  ASSERT_EQ(back.kept_vs_removed.size(), 1u);
  EXPECT_EQ(back.kept_vs_removed[0].removed, 2);
  EXPECT_EQ(back.run, std::optional<std::string>("r"));
}

TEST(AnalysisRecords, CompareJsonReadsBackWhatWasWritten) {
  testing::TempDir dir;
  CompareRecord r;
  r.checkpoint = "ck";
  r.run = "run";
  r.method = "l0";
  r.sentences = 5;
  r.gated_heads = 6;
  r.removed_heads = 3;
  r.bleu_full = 20.5;
  r.bleu_l0_masked = 19.25;
  r.bleu_michel_masked = 18;
  r.bleu_michel_tuned = 21;
  r.michel_removed_heads = {"enc_self L0 H1"};
  r.spearman_importance = std::nan("");  // written as null
  r.spearman_confidence = -0.5;
  r.top_importance_heads = {{"enc_self L0 H0", 0.75, std::nullopt}, {"dec_self L0 H1", 0.5, 3.0}};
  const auto file = AnalysisFolder{dir.path()}.compare();
  write_compare_record(file, r);
  // The keys the report and earlier records use, by name (not only the reader's own view).
  const auto j = nlohmann::json::parse(io::read_file(file));
  EXPECT_EQ(j.at("removed_heads"), 3);
  EXPECT_EQ(j.at("bleu_l0_heads_masked_no_finetuning"), 19.25);
  EXPECT_EQ(j.at("bleu_michel_same_counts_masked_no_finetuning"), 18.0);
  EXPECT_EQ(j.at("bleu_michel_pruned_finetuned_same_budget"), 21.0);
  EXPECT_TRUE(j.at("bleu_l0_pruned_checkpoint_finetuned").is_null());
  EXPECT_TRUE(j.at("spearman_importance_vs_removal_step").is_null());
  EXPECT_EQ(j.at("spearman_confidence_vs_removal_step"), -0.5);
  const auto back = read_compare_record(file);
  EXPECT_EQ(back.method, "l0");
  EXPECT_EQ(back.removed_heads, 3u);
  EXPECT_EQ(back.bleu_l0_masked, 19.25);
  EXPECT_FALSE(back.bleu_l0_tuned.has_value());
  EXPECT_EQ(back.bleu_michel_tuned, std::optional<double>(21));
  EXPECT_TRUE(std::isnan(back.spearman_importance));
  EXPECT_EQ(back.spearman_confidence, -0.5);
  ASSERT_EQ(back.top_importance_heads.size(), 2u);
  EXPECT_FALSE(back.top_importance_heads[0].removal_step.has_value());
  EXPECT_EQ(back.top_importance_heads[1].removal_step, std::optional<double>(3.0));
  EXPECT_EQ(back.michel_removed_heads, r.michel_removed_heads);
}

TEST(AnalysisRecords, HeadsCsvGivesEachRowsFunctions) {
  testing::TempDir dir;
  HeadRow self, cross;
  self.head = {AttentionType::kEncSelf, 0, 1};
  self.self_attention = true;
  self.top_offset = -1;
  self.function = "positional+rare-token";
  cross.head = {AttentionType::kEncDec, 1, 0};
  cross.syntax = SyntacticVerdict{true, "nsubj", DepDirection::kDependentToHead, 0.5, 0.25};
  cross.function = "none";
  const auto file = AnalysisFolder{dir.path()}.heads();
  write_heads_csv(file, {self, cross});
  const auto lines = io::read_lines(file);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1],
            "enc_self,0,1,0.0000,0.0000,0.0000,0.0000,0.0000,0.0000,-1,0.0000,0,0.0000,,,,,"
            "positional+rare-token");
  EXPECT_EQ(lines[2],
            "enc_dec,1,0,0.0000,0.0000,0.0000,,,,,,0,0.0000,1,nsubj dep->head,0.5000,0.2500,none");
  const auto functions = read_head_functions(file);
  ASSERT_EQ(functions.size(), 2u);
  EXPECT_EQ(functions[0], (std::vector<std::string>{"positional", "rare-token"}));
  EXPECT_EQ(functions[1], (std::vector<std::string>{"none"}));
}

// --sentences 0 is the whole split: the summary says "all", not "0 sentences".
TEST(AnalysisRecords, CompareSummaryNamesTheWholeSplitAll) {
  EXPECT_EQ(sentence_count(0), "all");
  EXPECT_EQ(sentence_count(300), "300");
  CompareResult r;
  r.gated = 144;
  r.removed = 72;
  const std::string all = compare_summary(r, "RUN", 0, "dev", 4, "OUT");
  EXPECT_NE(all.find("BLEU, all dev sentences, beam 4:"), std::string::npos) << all;
  const std::string some = compare_summary(r, "RUN", 300, "test", 1, "OUT");
  EXPECT_NE(some.find("BLEU, 300 test sentences, beam 1:"), std::string::npos) << some;
}

}  // namespace
}  // namespace headcount::analysis
