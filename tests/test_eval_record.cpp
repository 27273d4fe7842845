// eval-SPLIT.json: the bytes `headcount eval` writes, and reading them back.
#include <gtest/gtest.h>
#include <torch/version.h>

#include <filesystem>

#include "headcount/common/provenance.h"
#include "headcount/eval/record.h"

namespace headcount::eval {
namespace {

EvalRecord sample() {
  EvalRecord r;
  r.checkpoint = "run/checkpoints/best";
  r.data = "test";
  r.sentences = 2;
  r.beam = 4;
  r.length_penalty = 0.6;
  r.precision = "fp32";
  r.device = "cpu";
  r.heads_e_d_de = "8/8/8";
  r.decode_seconds = 0.5;
  r.sentences_per_s = 4.0;
  r.ref_files = {"data/test.de"};
  ReferenceScores s;
  s.name = "ref1";
  s.bleu = 12.5;
  s.bleu_signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.0";
  s.bleu_verbose = "50.0/25.0/12.5/6.2 (BP = 1.000 ratio = 1.000 hyp_len = 8 ref_len = 8)";
  s.chrf = 40.25;
  s.chrf_signature = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.4.0";
  r.scores = {s};
  return r;
}

TEST(EvalRecord, WritesTheKeysInTheirOrder) {
  const std::string expected = R"json({
  "checkpoint": "run/checkpoints/best",
  "data": "test",
  "sentences": 2,
  "beam": 4,
  "length_penalty": 0.6,
  "precision": "fp32",
  "device": "cpu",
  "heads_e_d_de": "8/8/8",
  "decode_seconds": 0.5,
  "sentences_per_s": 4.0,
  "ref_files": [
    "data/test.de"
  ],
  "scores": {
    "ref1": {
      "bleu": 12.5,
      "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.0",
      "bleu_verbose": "50.0/25.0/12.5/6.2 (BP = 1.000 ratio = 1.000 hyp_len = 8 ref_len = 8)",
      "chrf": 40.25,
      "chrf_signature": "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.4.0"
    }
  }
})json";
  EXPECT_EQ(to_json(sample()).dump(2), expected);  // no provenance given: none written
  // Where it was decoded (the commit, machine and LibTorch), after the references, and read back.
  auto r = sample();
  r.provenance = provenance::record();
  EXPECT_EQ(provenance::record().at("libtorch"), TORCH_VERSION);
  EXPECT_FALSE(provenance::record().at("commit").get<std::string>().empty());
  const auto j = to_json(r);
  EXPECT_EQ(nlohmann::json(j.at("provenance")), provenance::record());
  auto keys = std::vector<std::string>{};
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys.at(keys.size() - 2), "provenance");  // after ref_files, before scores
  EXPECT_EQ(eval::eval_record_from_json(nlohmann::json(j)).provenance, provenance::record());
}

TEST(EvalRecord, KeepsTheLengthPenaltyTuningAfterTheChoice) {
  auto r = sample();
  r.length_penalty_tuning = {{0.6, 30.5}, {1.0, 31.25}};
  r.length_penalty = 1.0;
  const auto j = to_json(r);
  EXPECT_EQ(j.at("length_penalty_tuning").dump(),
            R"([{"length_penalty":0.6,"dev_bleu":30.5},{"length_penalty":1.0,"dev_bleu":31.25}])");
  auto keys = std::vector<std::string>{};
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys.at(5), "length_penalty_tuning");  // right after length_penalty
  auto back = eval_record_from_json(nlohmann::json(j));
  ASSERT_EQ(back.length_penalty_tuning.size(), 2u);
  EXPECT_EQ(back.length_penalty_tuning[1].length_penalty, 1.0);
  EXPECT_EQ(back.length_penalty_tuning[1].dev_bleu, 31.25);
  // An entry missing a number is skipped, not read as zero.
  back = eval_record_from_json(nlohmann::json::parse(
      R"({"length_penalty_tuning": [{"length_penalty": 0.6}, {"length_penalty": 1, "dev_bleu": 2}]})"));
  ASSERT_EQ(back.length_penalty_tuning.size(), 1u);
  EXPECT_EQ(back.length_penalty_tuning[0].dev_bleu, 2.0);
}

TEST(EvalRecord, ReadsBackWhatItWrote) {
  const auto path = std::filesystem::temp_directory_path() / "headcount_test_eval_record.json";
  auto written = sample();
  written.hyp_file = "run/eval-test.hyp.txt";
  write_eval_record(path, written);
  const auto r = read_eval_record(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->checkpoint, written.checkpoint);
  EXPECT_EQ(r->sentences, 2u);
  EXPECT_EQ(r->hyp_file, written.hyp_file);
  EXPECT_EQ(r->ref_files, written.ref_files);
  ASSERT_NE(r->score("ref1"), nullptr);
  EXPECT_EQ(*r->score("ref1")->bleu, 12.5);
  EXPECT_EQ(*r->score("ref1")->chrf, 40.25);
  EXPECT_EQ(r->score("all_refs"), nullptr);
}

TEST(EvalRecord, ReadsAMissingScoreAsAbsent) {
  const auto r = eval_record_from_json(nlohmann::json::parse(R"({"scores": {"ref1": {}}})"));
  ASSERT_NE(r.score("ref1"), nullptr);
  EXPECT_FALSE(r.score("ref1")->bleu);
  EXPECT_EQ(r.sentences_per_s, 0.0);
  EXPECT_FALSE(read_eval_record("/nonexistent/eval-test.json"));
}

TEST(EvalRecord, ScoresEachReferenceThenAll) {
  const std::vector<std::string> hyps = {"the cat sat on the mat"};
  const auto s = score_references(hyps, {{"the cat sat on the mat"}, {"a cat sat on a mat"}});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "ref1");
  EXPECT_EQ(s[1].name, "ref2");
  EXPECT_EQ(s[2].name, "all_refs");
  EXPECT_NEAR(*s[0].bleu, 100.0, 1e-9);
  EXPECT_NEAR(*s[2].bleu, 100.0, 1e-9);
}

}  // namespace
}  // namespace headcount::eval
