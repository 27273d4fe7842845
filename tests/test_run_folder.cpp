// The run-folder files' typed readers and writers (include/headcount/run/run_folder.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "headcount/common/io.h"
#include "headcount/common/provenance.h"
#include "headcount/common/run_guard.h"
#include "headcount/run/run_folder.h"
#include "test_util.h"

namespace headcount {
namespace {

using model::AttentionType;
using testing::TempDir;

TEST(RunFolder, HeadRemovalOfAnL0RunIsWrittenInItsFormatAndReadBack) {
  TempDir dir;
  std::vector<run::HeadRemoval> rows(2);
  rows[0].head = {AttentionType::kEncDec, 3, 5};
  rows[0].removal_step = 400;
  rows[0].p_open = 0.0123456789;
  rows[0].gate = 0;
  rows[0].dev_bleu = 33.456;
  rows[1].head = {AttentionType::kEncSelf, 0, 1};
  rows[1].p_open = 1;
  rows[1].gate = 0.75;
  const fs::path file = dir / "head_removal.csv";
  run::write_head_removal(file, rows, run::HeadRemovalKind::kL0);
  // The format by hand: six decimals for p_open and gate, two for BLEU, empty cells for a kept
  // head's removal step and BLEU.
  EXPECT_EQ(io::read_file(file),
            "attention,layer,head,removal_step,p_open,gate,dev_bleu_at_removal\n"
            "enc_dec,3,5,400,0.012346,0.000000,33.46\n"
            "enc_self,0,1,,1.000000,0.750000,\n");
  const auto back = run::read_head_removal(file);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].head, rows[0].head);
  EXPECT_EQ(back[0].removal_step, 400);
  EXPECT_DOUBLE_EQ(*back[0].dev_bleu, 33.46);
  EXPECT_FALSE(back[0].fisher.has_value());
  EXPECT_EQ(back[1].head, rows[1].head);
  EXPECT_FALSE(back[1].removal_step.has_value());
  EXPECT_FALSE(back[1].dev_bleu.has_value());
  EXPECT_DOUBLE_EQ(*back[1].gate, 0.75);
}

TEST(RunFolder, HeadRemovalOfAFisherRunKeepsItsColumns) {
  TempDir dir;
  std::vector<run::HeadRemoval> rows(2);
  rows[0].head = {AttentionType::kDecSelf, 1, 2};
  rows[0].removal_step = 1;
  rows[0].fisher = 1.5e-7;
  rows[1].head = {AttentionType::kDecSelf, 1, 3};
  rows[1].fisher = 0.25;
  const fs::path file = dir / "head_removal.csv";
  run::write_head_removal(file, rows, run::HeadRemovalKind::kFisher);
  EXPECT_EQ(io::read_file(file),
            "attention,layer,head,removal_step,fisher,kept,dev_bleu_at_removal\n"
            "dec_self,1,2,1,1.5e-07,0,\n"
            "dec_self,1,3,,0.25,1,\n");
  const auto back = run::read_head_removal(file);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].removal_step, 1);
  EXPECT_DOUBLE_EQ(*back[1].fisher, 0.25);
  EXPECT_FALSE(back[1].p_open.has_value());
}

TEST(RunFolder, BadHeadRemovalFilesNameTheFileAndLine) {
  TempDir dir;
  const fs::path file = dir / "head_removal.csv";
  io::write_file_atomic(file, "layer,head\n0,1\n");
  auto msg = testing::error_of([&] { run::read_head_removal(file); });
  EXPECT_NE(msg.find("line 1: no 'attention' column"), std::string::npos) << msg;
  io::write_file_atomic(file, "attention,layer,head,removal_step\nenc_self,0,1,\nenc_self,x,1,\n");
  msg = testing::error_of([&] { run::read_head_removal(file); });
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  io::write_file_atomic(file, "attention,layer,head,removal_step\nsomething,0,1,\n");
  msg = testing::error_of([&] { run::read_head_removal(file); });
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
  io::write_file_atomic(file, "attention,layer,head,removal_step\nenc_self,0,1\n");
  msg = testing::error_of([&] { run::read_head_removal(file); });
  EXPECT_NE(msg.find("line 2: 3 fields, the header has 4"), std::string::npos) << msg;
}

// summary.json: one type for a trainer's and a post-training method's summary; each writes only
// its own keys, and the file reads back to the same fields.
TEST(RunFolder, SummaryOfEitherKindRoundTripsWithItsOwnKeys) {
  TempDir dir;
  const run::RunFolder f{dir.path()};
  run::RunSummary train;
  train.status = "early-stopped";
  train.steps = 1200;
  train.best_step = 800;
  train.best_metric = "bleu";
  train.best_score = 33.5;
  train.precision = "fp32";
  train.precision_reason = "configured";
  train.train_seconds = 12.5;
  train.target_tokens_per_s = 1000.25;
  run::write_summary(f, train);
  auto j = nlohmann::json::parse(io::read_file(f.summary()));
  EXPECT_EQ(j.size(), 9u + 1) << j.dump();  // its keys, and where it ran
  EXPECT_EQ(j.at("provenance"), provenance::record());
  EXPECT_EQ(j.at("status"), "early-stopped");
  EXPECT_EQ(j.at("best_step"), 800);
  EXPECT_FALSE(j.contains("method"));
  const auto back = run::read_summary(f);
  EXPECT_EQ(back.status, train.status);
  EXPECT_EQ(back.steps, 1200);
  EXPECT_EQ(back.best_score, 33.5);
  EXPECT_EQ(back.target_tokens_per_s, 1000.25);
  EXPECT_FALSE(back.method.has_value());
  EXPECT_FALSE(back.world_size.has_value());

  run::RunSummary fisher;
  fisher.command = "prune";
  fisher.method = "fisher";
  fisher.seconds = 3;
  fisher.pruning_seconds = 2;
  fisher.dev_bleu_start = 30.5;
  fisher.dev_bleu_end = 29.25;
  run::write_summary(f, fisher);
  j = nlohmann::json::parse(io::read_file(f.summary()));
  EXPECT_EQ(j.size(), 6u + 1) << j.dump();
  EXPECT_FALSE(j.contains("status"));
  const auto fb = run::read_summary(f);
  EXPECT_EQ(fb.method, "fisher");
  EXPECT_EQ(fb.dev_bleu_end, 29.25);
  EXPECT_FALSE(fb.steps.has_value());
}

TEST(RunFolder, BadSummariesNameTheFileAndKey) {
  TempDir dir;
  const run::RunFolder f{dir.path()};
  io::write_file_atomic(f.summary(), "{\"status\": \"finished\", \"steps\": \"many\"}\n");
  auto msg = testing::error_of([&] { run::read_summary(f); });
  EXPECT_NE(msg.find("summary.json: \"steps\" is \"many\", expected a number"), std::string::npos)
      << msg;
  io::write_file_atomic(f.summary(), "[1, 2]\n");
  msg = testing::error_of([&] { run::read_summary(f); });
  EXPECT_NE(msg.find("summary.json: expected a JSON object"), std::string::npos) << msg;
  io::write_file_atomic(f.summary(), "{\"steps\": 3}\n");
  msg = testing::error_of([&] { run::read_summary(f); });
  EXPECT_NE(msg.find("not a run summary"), std::string::npos) << msg;
  io::write_file_atomic(f.summary(), "{\"status\": \n");
  msg = testing::error_of([&] { run::read_summary(f); });
  EXPECT_NE(msg.find("summary.json: not JSON"), std::string::npos) << msg;
}

TEST(RunFolder, GateSnapshotsRoundTripAndBadLinesAreNamed) {
  TempDir dir;
  const fs::path file = dir / "gates.jsonl";
  run::GateSnapshot s;
  s.step = 200;
  s.dev_bleu = 12.5;
  s.heads = {{{AttentionType::kEncSelf, 0, 0}, 0.5, 1.0}, {{AttentionType::kEncDec, 1, 3}, 0, 0}};
  run::append_gates(file, s);
  s.step = 400;
  s.final = true;
  run::append_gates(file, s);
  // The line format by hand (keys sorted, heads as [attention, layer, head, p_open, gate]).
  EXPECT_EQ(io::read_lines(file)[0],
            "{\"dev_bleu\":12.5,\"final\":false,\"heads\":[[\"enc_self\",0,0,0.5,1.0],"
            "[\"enc_dec\",1,3,0.0,0.0]],\"step\":200}");
  const auto back = run::read_gates(file);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].step, 400);
  EXPECT_TRUE(back[1].final);
  EXPECT_EQ(back[0].heads[1].head, (model::HeadId{AttentionType::kEncDec, 1, 3}));
  EXPECT_DOUBLE_EQ(back[0].heads[0].p_open, 0.5);
  io::append_line(file, "{\"step\": 600}");
  const auto msg = testing::error_of([&] { run::read_gates(file); });
  EXPECT_NE(msg.find("gates.jsonl line 3"), std::string::npos) << msg;
}

TEST(RunFolder, JsonlSkipsCutLinesAndTrimKeepsTheOthersByteForByte) {
  TempDir dir;
  const fs::path file = dir / "metrics.jsonl";
  io::write_file_atomic(file,
                        "{\"event\":\"eval\",\"step\":0,\"dev_bleu\":1.50}\n"
                        "{\"event\":\"train\", \"step\":10}\n"
                        "{\"event\":\"eval\",\"step\":20,\"dev_bleu\":2.0}\n"
                        "{\"event\":\"tra");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run::read_jsonl(file).size(), 3u);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // the cut last line: silently
  EXPECT_EQ(run::read_jsonl(dir / "missing.jsonl").size(), 0u);
  // A broken line that is not the last is skipped with a warning that names it.
  const fs::path mid = dir / "mid.jsonl";
  io::write_file_atomic(mid, "{\"step\":1}\n{\"ste\n\n{\"step\":3}\n\n");
  ::testing::internal::CaptureStderr();
  const auto read = run::read_jsonl(mid);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[1]["step"].get<int>(), 3);
  EXPECT_NE(warned.find("mid.jsonl line 2 is not JSON"), std::string::npos) << warned;
  const auto eval = run::eval_record(file, 20);
  ASSERT_TRUE(eval.has_value());
  EXPECT_DOUBLE_EQ((*eval)["dev_bleu"].get<double>(), 2.0);
  EXPECT_FALSE(run::eval_record(file, 10).has_value());
  run::trim_jsonl(file, [](const nlohmann::json& j) { return j["step"].get<int>() <= 10; });
  EXPECT_EQ(io::read_file(file),
            "{\"event\":\"eval\",\"step\":0,\"dev_bleu\":1.50}\n"
            "{\"event\":\"train\", \"step\":10}\n");
}

TEST(RunFolder, PathsOfARun) {
  const run::RunFolder f{"runs/x"};
  EXPECT_EQ(f.last(), fs::path("runs/x/checkpoints/last"));
  EXPECT_EQ(f.step_checkpoint(1200), fs::path("runs/x/checkpoints/step-1200"));
  EXPECT_EQ(f.pruned(), fs::path("runs/x/pruned"));
  EXPECT_TRUE(run::RunFolder::is_early_run_file("gates.jsonl"));
  EXPECT_FALSE(run::RunFolder::is_early_run_file("pruning.json"));
}

TEST(RunFolder, CheckpointStepsAreTheStepFoldersAlone) {
  TempDir dir;
  const run::RunFolder f{dir.path()};
  EXPECT_TRUE(f.checkpoint_steps().empty());  // no checkpoints/ yet
  for (const char* name :
       {"step-30", "step-1200", "last", "best", "step-", "step-12x", ".tmp-step-5"})
    fs::create_directories(f.checkpoints() / name);
  auto steps = f.checkpoint_steps();
  std::sort(steps.begin(), steps.end());
  EXPECT_EQ(steps, (std::vector<int64_t>{30, 1200}));
}

}  // namespace
}  // namespace headcount
