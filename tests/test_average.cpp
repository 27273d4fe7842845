// Checkpoint averaging: the mean of the weights against values set by hand and against the mean
// LibTorch computes from the loaded models, the choice of a run's newest checkpoints, and the
// inputs that cannot be averaged.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "headcount/common/io.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/export.h"
#include "headcount/run/average.h"
#include "headcount/run/checkpoint.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

namespace fs = std::filesystem;

// A copy of checkpoint `from` at `to` whose every weight is `value`, recorded at `step`.
void write_constant(const fs::path& from, const fs::path& to, float value, int64_t step) {
  const auto info = run::read_checkpoint_info(from);
  auto m = run::load_model(info, torch::kCPU);
  torch::NoGradGuard no_grad;
  for (auto& p : m->parameters()) p.fill_(value);
  run::TrainState state = info.state;
  state.step = step;
  run::save_checkpoint(to, m, nullptr, state, info.config, info.vocab);
}

TEST(Average, TheMeanOfWeightsSetByHand) {
  testing::TempDir dir;
  const fs::path base = train_tiny_model(dir, 2);
  write_constant(base, dir / "a", 1.0f, 10);
  write_constant(base, dir / "b", 3.0f, 30);
  write_constant(base, dir / "c", 8.0f, 20);
  const auto r = run::average_checkpoints({dir / "a", dir / "b", dir / "c"}, dir / "avg");
  EXPECT_EQ(r.steps, (std::vector<int64_t>{10, 30, 20}));
  EXPECT_EQ(r.step, 30);  // the newest input's state
  const auto info = run::read_checkpoint_info(dir / "avg");
  EXPECT_EQ(info.state.step, 30);
  EXPECT_EQ(info.architecture, run::read_checkpoint_info(base).architecture);
  auto m = run::load_model(info, torch::kCPU);
  for (const auto& p : m->parameters())
    EXPECT_TRUE(torch::all(p == 4.0f).item<bool>()) << p.flatten()[0].item<float>();  // 12 / 3
  const auto record = nlohmann::json::parse(io::read_file(dir / "avg" / "averaged.json"));
  ASSERT_EQ(record["averaged"].size(), 3u);
  EXPECT_EQ(record["averaged"][1]["step"], 30);
  EXPECT_EQ(fs::path(record["averaged"][1]["checkpoint"].get<std::string>()).filename(), "b");
  EXPECT_FALSE(fs::exists(dir / "avg" / "optimizer.pt"));
  // One checkpoint averages to itself.
  run::average_checkpoints({dir / "b"}, dir / "one");
  for (const auto& p :
       run::load_model(run::read_checkpoint_info(dir / "one"), torch::kCPU)->parameters())
    EXPECT_TRUE(torch::all(p == 3.0f).item<bool>());
}

TEST(Average, TheNewestCheckpointsOfARunAgainstLibTorchsMean) {
  testing::TempDir dir;
  train_tiny_model(dir, 6, [](Config& c) {
    c.train.eval_every = 2;
    c.train.keep_last = 3;
  });
  const fs::path run = dir / "run";
  const auto last = run::last_step_checkpoints(run, 2);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].filename(), "step-4");
  EXPECT_EQ(last[1].filename(), "step-6");
  EXPECT_NE(testing::error_of([&] {
              run::last_step_checkpoints(run, 4);
            }).find("keeps 3 step-N checkpoint(s)"),
            std::string::npos);
  run::average_checkpoints(last, dir / "avg");
  auto a = run::load_model(run::read_checkpoint_info(last[0]), torch::kCPU);
  auto b = run::load_model(run::read_checkpoint_info(last[1]), torch::kCPU);
  auto avg = run::load_model(run::read_checkpoint_info(dir / "avg"), torch::kCPU);
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  size_t moved = 0;
  for (const auto& p : avg->named_parameters()) {
    const auto want = (pa[p.key()] + pb[p.key()]) / 2;
    EXPECT_TRUE(torch::allclose(p.value(), want, 1e-6, 1e-7)) << p.key();
    if (!torch::equal(pa[p.key()], pb[p.key()])) ++moved;
  }
  EXPECT_GT(moved, 0u) << "the two checkpoints should differ for the mean to mean anything";
  // The averaged checkpoint is a model the other commands load: it computes logits.
  avg->eval();
  torch::NoGradGuard no_grad;
  const auto logits = avg->forward(torch::randint(4, 30, {2, 5}), torch::randint(4, 30, {2, 4}));
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
}

TEST(Average, CheckpointsOfAnotherModelAndAnExistingOutputAreErrors) {
  testing::TempDir dir;
  const fs::path base = train_tiny_model(dir, 2);
  prune::export_without_heads(base, {{model::AttentionType::kEncSelf, 0, 1}}, dir / "smaller");
  EXPECT_NE(testing::error_of([&] {
              run::average_checkpoints({base, dir / "smaller"}, dir / "avg");
            }).find("only checkpoints of one model (the same architecture) can be averaged"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "avg"));
  fs::create_directories(dir / "full");
  std::ofstream(dir / "full" / "x") << "x";
  EXPECT_NE(testing::error_of([&] {
              run::average_checkpoints({base}, dir / "full");
            }).find("refusing to overwrite"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              run::average_checkpoints({}, dir / "avg");
            }).find("no checkpoints to average"),
            std::string::npos);
}

}  // namespace
}  // namespace headcount
