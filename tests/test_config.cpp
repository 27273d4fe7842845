// Config: precedence, errors that name key, file and line, the dump round trip.
#include <gtest/gtest.h>

#include <fstream>

#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "test_util.h"

namespace headcount {
namespace {

using testing::error_of;
using testing::TempDir;

fs::path write_yaml(const TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

TEST(Config, DefaultsFilesThenSetOverrides) {
  TempDir dir;
  const auto a = write_yaml(dir, "a.yaml", "vocab:\n  size: 4000\n  model_type: bpe\nseed: 7\n");
  const auto b = write_yaml(dir, "b.yaml", "vocab:\n  size: 5000\n");
  ConfigLoader l;
  l.apply_file(a);
  l.apply_file(b);
  l.apply_set("seed=9");
  l.apply_set("data.test_extra_refs=[x.en, y.en]");
  const Config c = l.finish();
  EXPECT_EQ(c.vocab.size, 5000);                           // later file wins
  EXPECT_EQ(c.vocab.model_type, "bpe");                    // earlier file kept where not overridden
  EXPECT_EQ(c.seed, 9);                                    // --set wins over files
  EXPECT_EQ(c.data.max_tokens, Config().data.max_tokens);  // default
  EXPECT_EQ(c.data.test_extra_refs, (std::vector<std::string>{"x.en", "y.en"}));
  EXPECT_EQ(l.origin("vocab.size"), (dir / "b.yaml").string() + ":2");
  EXPECT_EQ(l.origin("seed"), "--set");
  EXPECT_EQ(l.origin("data.dir"), "default");
}

TEST(Config, UnknownKeyNamesFileLineAndSuggestion) {
  TempDir dir;
  const auto p = write_yaml(dir, "bad.yaml", "seed: 1\nvocab:\n  szie: 4000\n");
  const std::string e = error_of([&] { ConfigLoader().apply_file(p); });
  EXPECT_NE(e.find(p.string() + ":3"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'vocab.szie'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'vocab.size'"), std::string::npos) << e;
  // A right key in the wrong section.
  const auto q = write_yaml(dir, "sect.yaml", "data:\n  model_type: bpe\n");
  EXPECT_NE(error_of([&] { ConfigLoader().apply_file(q); }).find("'vocab.model_type'"),
            std::string::npos);
}

TEST(Config, WrongTypesAndRanges) {
  TempDir dir;
  const auto p = write_yaml(dir, "t.yaml", "vocab:\n  size: lots\n");
  std::string e = error_of([&] { ConfigLoader().apply_file(p); });
  EXPECT_NE(e.find(":2: vocab.size: expected an integer, got 'lots'"), std::string::npos) << e;
  const auto q = write_yaml(dir, "r.yaml", "data:\n  max_length_ratio: 0.5\n");
  e = error_of([&] { ConfigLoader().apply_file(q); });
  EXPECT_NE(e.find(":2: data.max_length_ratio: must be between 1 and 1000, got 0.5"),
            std::string::npos)
      << e;
  e = error_of([&] { ConfigLoader().apply_set("vocab.model_type=wordpiece"); });
  EXPECT_NE(e.find("expected one of unigram, bpe, got 'wordpiece'"), std::string::npos) << e;
  e = error_of([&] { ConfigLoader().apply_set("device=gpu"); });
  EXPECT_NE(e.find("expected auto, cpu, cuda or cuda:N"), std::string::npos) << e;
  e = error_of([&] { ConfigLoader().apply_set("vocab=3"); });
  EXPECT_NE(e.find("unknown key 'vocab'"), std::string::npos) << e;
  e = error_of([&] { ConfigLoader().apply_set("novalue"); });
  EXPECT_NE(e.find("expected key=value"), std::string::npos) << e;
  const auto s = write_yaml(dir, "s.yaml", "vocab: 3\n");
  e = error_of([&] { ConfigLoader().apply_file(s); });
  EXPECT_NE(e.find("'vocab' is a section"), std::string::npos) << e;
  const auto l = write_yaml(dir, "l.yaml", "data:\n  test_extra_refs: a.en\n");
  e = error_of([&] { ConfigLoader().apply_file(l); });
  EXPECT_NE(e.find("expected a list of strings"), std::string::npos) << e;
}

TEST(Config, SyntaxErrorsAndCrossKeyChecks) {
  TempDir dir;
  const auto p = write_yaml(dir, "syn.yaml", "seed: 1\nvocab: [1, 2\n");
  const std::string e = error_of([&] { ConfigLoader().apply_file(p); });
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
  EXPECT_NE(e.find(p.string() + ":"), std::string::npos) << e;
  ConfigLoader l;
  l.apply_set("data.min_tokens=50");
  l.apply_set("data.max_tokens=10");
  EXPECT_NE(error_of([&] { l.finish(); }).find("data.min_tokens (50, from --set)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ConfigLoader().apply_file(dir / "missing.yaml"); }).find("not found"),
            std::string::npos);
}

TEST(Config, IntegersAreDecimalWithLeadingZerosAsYaml12ReadsThem) {
  // yaml-cpp would read 0100 as octal 64; YAML 1.2 (and every user) reads a hundred.
  const struct {
    std::string text;
    int64_t want;
  } rows[] = {{"0100", 100}, {"010", 10}, {"+007", 7}, {"0x30", 48}, {"100", 100}};
  for (const auto& r : rows) {
    ConfigLoader l;
    l.apply_set("train.max_steps=" + r.text);
    EXPECT_EQ(l.finish().train.max_steps, r.want) << r.text;
  }
  TempDir dir;
  const auto p = write_yaml(dir, "o.yaml", "vocab:\n  size: 060\nseed: 010\n");
  ConfigLoader l;
  l.apply_file(p);
  EXPECT_EQ(l.finish().vocab.size, 60);
  for (const std::string bad : {"0o60", "1e3", "12abc", "0x", "--5", "9223372036854775808"}) {
    const std::string e = error_of([&] { ConfigLoader().apply_set("seed=" + bad); });
    EXPECT_TRUE(e.find("expected an integer") != std::string::npos ||
                e.find("out of range") != std::string::npos)
        << bad << ": " << e;
  }
}

TEST(Config, DumpLoadsBackToTheSameConfig) {
  TempDir dir;
  ConfigLoader l;
  l.apply_set("vocab.size=1234");
  l.apply_set("data.test_extra_refs=[]");
  l.apply_set("data.max_length_ratio=2.5");
  const Config c = l.finish();
  save_config(c, dir / "config.yaml");
  const Config back = load_config_file(dir / "config.yaml");
  EXPECT_EQ(dump_config(back), dump_config(c));
  EXPECT_EQ(back.vocab.size, 1234);
  EXPECT_TRUE(back.data.test_extra_refs.empty());
  EXPECT_DOUBLE_EQ(back.data.max_length_ratio, 2.5);
  // Every key is listed with its default.
  EXPECT_GE(config_keys().size(), 20u);
}

TEST(Config, ChoicesAreEnumsParsedOnceAndWrittenBackByName) {
  TempDir dir;
  // The defaults, as the schema documents them.
  const Config d;
  EXPECT_EQ(d.train.lr_schedule, LrSchedule::kInverseSqrt);
  EXPECT_EQ(d.train.best_metric, BestMetric::kBleu);
  EXPECT_EQ(d.prune.lambda_schedule, LambdaScheduleKind::kConstant);
  EXPECT_EQ(d.prune.penalty_norm, PenaltyNorm::kLayerMean);
  EXPECT_EQ(d.prune.noise, GateNoise::kHead);
  EXPECT_EQ(d.prune.method, PruneMethod::kL0);
  // Every other name of every choice, from a file and read back from the dump.
  const auto p = write_yaml(dir, "c.yaml",
                            "train:\n  lr_schedule: cosine\n  best_metric: loss\n"
                            "prune:\n  lambda_schedule: piecewise\n  lambda_steps: [0]\n"
                            "  lambda_values: [0.1]\n  penalty_norm: sum\n  noise: example\n");
  const Config c = load_config_file(p);
  EXPECT_EQ(c.train.lr_schedule, LrSchedule::kCosine);
  EXPECT_EQ(c.train.best_metric, BestMetric::kLoss);
  EXPECT_EQ(c.prune.lambda_schedule, LambdaScheduleKind::kPiecewise);
  EXPECT_EQ(c.prune.penalty_norm, PenaltyNorm::kSum);
  EXPECT_EQ(c.prune.noise, GateNoise::kExample);
  EXPECT_EQ(config_value(c, "train.lr_schedule"), "cosine");
  EXPECT_EQ(config_value(c, "prune.penalty_norm"), "sum");
  save_config(c, dir / "back.yaml");
  EXPECT_EQ(dump_config(load_config_file(dir / "back.yaml")), dump_config(c));
  ConfigLoader l;
  l.apply_set("train.lr_schedule=linear");
  l.apply_set("train.lr_schedule=constant");  // the later one wins
  EXPECT_EQ(l.finish().train.lr_schedule, LrSchedule::kConstant);
  // An unknown name: file, line, key and the choices.
  const auto bad = write_yaml(dir, "bad.yaml", "prune:\n  lambda: 1\n  penalty_norm: mean\n");
  const std::string e = error_of([&] { ConfigLoader().apply_file(bad); });
  EXPECT_NE(e.find("bad.yaml:3: prune.penalty_norm: expected one of sum, layer_mean, got 'mean'"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of([&] {
              ConfigLoader().apply_set("train.lr_schedule=exp");
            }).find("expected one of inverse_sqrt, constant, cosine, linear, got 'exp'"),
            std::string::npos);
}

// configs/bible-prune-target.yaml, layered as its header and the README give it: target mode's
// recipe (fix at the target, rewind, exact recovery of 2,400 steps within 3,000 at most, the one
// total split between the types by the gates' expected open heads).
TEST(Config, TargetRecipeFileLoadsOnTheBibleConfigs) {
  const fs::path configs = testing::source_dir() / "configs";
  ConfigLoader l;
  l.apply_file(configs / "bible-base.yaml");
  l.apply_file(configs / "bible-prune.yaml");
  l.apply_file(configs / "bible-prune-target.yaml");
  l.apply_set("prune.target_heads=36");
  const Config c = l.finish();
  EXPECT_EQ(c.prune.target_heads, 36);
  EXPECT_TRUE(c.prune.fix_at_target);
  EXPECT_TRUE(c.prune.rewind);
  EXPECT_TRUE(c.prune.exact_recovery);
  EXPECT_EQ(c.prune.recovery_steps, 2400);
  EXPECT_EQ(c.train.max_steps, 3000);
  EXPECT_EQ(c.prune.target_warmup_steps, 300);
  EXPECT_EQ(c.prune.lagrangian_lr, 0.05);
  EXPECT_EQ(c.prune.target_split, TargetSplit::kExpected);  // item 33 of experiments/l0-recovery
  EXPECT_EQ(c.prune.gate_seeds, (std::vector<double>{1, 2, 3}));  // items 48, 49 and 52
  EXPECT_EQ(c.prune.lambda, 0.05);  // bible-prune.yaml's, unused in target mode
  // One gate seed (the recipe before three became its default), and the error that names it
  // where a setting the gate runs need is turned off.
  l.apply_set("prune.gate_seeds=[]");
  EXPECT_TRUE(l.finish().prune.gate_seeds.empty());
  const ConfigLoader off = testing::repo_configs(
      {"bible-base.yaml", "bible-prune.yaml", "bible-prune-target.yaml"}, {"prune.rewind=false"});
  const std::string e = error_of([&] { off.finish(); });
  EXPECT_NE(e.find("prune.gate_seeds (from " + (configs / "bible-prune-target.yaml").string()),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("--set \"prune.gate_seeds=[]\""), std::string::npos) << e;
}

// configs/bible-prune.yaml alone is lambda mode's recipe (1,200 gated steps, then the mask fixed,
// the weights rewound, 2,400 steps under it); configs/bible-prune-gated.yaml after it gives the
// reference experiments' protocol (the 1,200 gated steps alone), which --method fisher also needs:
// the recovery settings are the gated fine-tuning's, and the error says how to turn them off.
TEST(Config, LambdaRecipeIsBiblePruneDefaultAndGatedFileTheReferenceProtocol) {
  const auto load = [](const std::vector<std::string>& files,
                       const std::vector<std::string>& sets) {
    return testing::repo_configs(files, sets).finish();
  };
  const Config recipe = load({"bible-base.yaml", "bible-prune.yaml"}, {});
  EXPECT_EQ(recipe.prune.target_heads, 0);
  EXPECT_EQ(recipe.prune.lambda, 0.05);
  EXPECT_TRUE(recipe.prune.rewind);
  EXPECT_EQ(recipe.prune.recovery_steps, 2400);
  EXPECT_EQ(recipe.train.max_steps, 3600);  // the mask is fixed at step 3,600 - 2,400 = 1,200
  const Config gated = load({"bible-base.yaml", "bible-prune.yaml", "bible-prune-gated.yaml"}, {});
  EXPECT_FALSE(gated.prune.rewind);
  EXPECT_EQ(gated.prune.recovery_steps, 0);
  EXPECT_EQ(gated.train.max_steps, 1200);
  EXPECT_EQ(gated.prune.lambda, 0.05);
  EXPECT_EQ(gated.prune.gate_lr, 0.02);

  const std::vector<std::string> fisher = {"prune.method=fisher", "prune.target_heads=72"};
  const std::string e = error_of([&] { load({"bible-base.yaml", "bible-prune.yaml"}, fisher); });
  EXPECT_NE(e.find("prune.recovery_steps (2400, from "), std::string::npos) << e;
  EXPECT_NE(e.find("bible-prune.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("prune.method is fisher (from --set)"), std::string::npos) << e;
  EXPECT_NE(e.find("configs/bible-prune-gated.yaml"), std::string::npos) << e;
  const Config f = load({"bible-base.yaml", "bible-prune.yaml", "bible-prune-gated.yaml"}, fisher);
  EXPECT_EQ(f.prune.method, PruneMethod::kFisher);
  // rewind alone (no recovery steps) is also refused with fisher, by the same check
  EXPECT_NE(error_of([&] {
              load({"bible-base.yaml", "bible-prune.yaml", "bible-prune-gated.yaml"},
                   {"prune.method=fisher", "prune.target_heads=72", "prune.rewind=true"});
            }).find("prune.rewind (true, from --set)"),
            std::string::npos);
  // with L0, the recovery steps must leave gated steps before them
  const std::string r = error_of([&] {
    load({"bible-base.yaml", "bible-prune.yaml"}, {"train.max_steps=2400"});
  });
  EXPECT_NE(r.find("prune.recovery_steps (2400, from "), std::string::npos) << r;
  EXPECT_NE(r.find("must be below train.max_steps (2400, from --set)"), std::string::npos) << r;
}

}  // namespace
}  // namespace headcount
