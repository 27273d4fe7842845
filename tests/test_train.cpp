// Training pieces: the schedule, batching, the loss, checkpoints, and whole runs of a tiny model
// (overfitting a handful of sentences, resuming after SIGKILL).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/precision.h"
#include "headcount/common/signals.h"
#include "headcount/data/batching.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/model/loss.h"
#include "headcount/run/checkpoint.h"
#include "headcount/train/schedule.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::TempDir;

TEST(Schedule, WarmupThenInverseSquareRoot) {
  // Linear from init to peak over the warm-up.
  EXPECT_DOUBLE_EQ(train::inverse_sqrt_lr(0, 1e-3, 100, 1e-7), 1e-7);
  EXPECT_DOUBLE_EQ(train::inverse_sqrt_lr(50, 1e-3, 100, 0.0), 5e-4);
  EXPECT_DOUBLE_EQ(train::inverse_sqrt_lr(100, 1e-3, 100, 1e-7), 1e-3);
  // Then peak * sqrt(warmup / step): a quarter of the rate at 16x the warm-up.
  EXPECT_DOUBLE_EQ(train::inverse_sqrt_lr(400, 1e-3, 100, 1e-7), 5e-4);
  EXPECT_DOUBLE_EQ(train::inverse_sqrt_lr(1600, 1e-3, 100, 1e-7), 2.5e-4);
  // Continuous at the end of the warm-up, decreasing after.
  EXPECT_GT(train::inverse_sqrt_lr(100, 1e-3, 100, 0), train::inverse_sqrt_lr(101, 1e-3, 100, 0));
}

TEST(Schedule, ConstantAfterWarmup) {
  EXPECT_DOUBLE_EQ(train::constant_lr(0, 2e-4, 100, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(train::constant_lr(50, 2e-4, 100, 0.0), 1e-4);
  EXPECT_DOUBLE_EQ(train::constant_lr(100, 2e-4, 100, 0.0), 2e-4);
  EXPECT_DOUBLE_EQ(train::constant_lr(100000, 2e-4, 100, 0.0), 2e-4);
  EXPECT_DOUBLE_EQ(train::constant_lr(5, 2e-4, 0, 0.0), 2e-4);
}

TEST(Schedule, CosineAndLinearDecayToZeroAtTheBudget) {
  // Warm-up as the others: linear from init to peak.
  EXPECT_DOUBLE_EQ(train::cosine_lr(50, 1e-3, 100, 0.0, 1100), 5e-4);
  EXPECT_DOUBLE_EQ(train::linear_lr(50, 1e-3, 100, 0.0, 1100), 5e-4);
  // Decay phase of 1000 steps: cos(pi * 1/4) = sqrt(2)/2, cos(pi/2) = 0, cos(pi * 3/4) =
  // -sqrt(2)/2.
  EXPECT_DOUBLE_EQ(train::cosine_lr(100, 1e-3, 100, 0.0, 1100), 1e-3);
  EXPECT_NEAR(train::cosine_lr(350, 1e-3, 100, 0.0, 1100), 1e-3 * (1 + std::sqrt(0.5)) / 2, 1e-15);
  EXPECT_NEAR(train::cosine_lr(600, 1e-3, 100, 0.0, 1100), 5e-4, 1e-15);
  EXPECT_NEAR(train::cosine_lr(850, 1e-3, 100, 0.0, 1100), 1e-3 * (1 - std::sqrt(0.5)) / 2, 1e-15);
  EXPECT_NEAR(train::cosine_lr(1100, 1e-3, 100, 0.0, 1100), 0.0, 1e-18);
  EXPECT_NEAR(train::cosine_lr(5000, 1e-3, 100, 0.0, 1100), 0.0, 1e-18);
  EXPECT_DOUBLE_EQ(train::linear_lr(100, 1e-3, 100, 0.0, 1100), 1e-3);
  EXPECT_NEAR(train::linear_lr(350, 1e-3, 100, 0.0, 1100), 7.5e-4, 1e-15);
  EXPECT_NEAR(train::linear_lr(1100, 1e-3, 100, 0.0, 1100), 0.0, 1e-18);
  EXPECT_NEAR(train::linear_lr(2000, 1e-3, 100, 0.0, 1100), 0.0, 1e-18);
  // No warm-up: the decay starts at step 0.
  EXPECT_DOUBLE_EQ(train::linear_lr(0, 1e-3, 0, 0.0, 10), 1e-3);
  EXPECT_NEAR(train::linear_lr(5, 1e-3, 0, 0.0, 10), 5e-4, 1e-15);
  // The dispatcher follows train.lr_schedule's names, parsed once.
  auto named = [](const char* name) { return parse_choice<LrSchedule>(name, "train.lr_schedule"); };
  EXPECT_DOUBLE_EQ(train::scheduled_lr(named("cosine"), 600, 1e-3, 100, 0.0, 1100),
                   train::cosine_lr(600, 1e-3, 100, 0.0, 1100));
  EXPECT_DOUBLE_EQ(train::scheduled_lr(named("linear"), 600, 1e-3, 100, 0.0, 1100), 5e-4);
  EXPECT_DOUBLE_EQ(train::scheduled_lr(named("constant"), 600, 1e-3, 100, 0.0, 1100), 1e-3);
  EXPECT_DOUBLE_EQ(train::scheduled_lr(named("inverse_sqrt"), 400, 1e-3, 100, 0.0, 1100), 5e-4);
}

std::vector<data::Example> examples_of_lengths(const std::vector<std::pair<int, int>>& lens) {
  std::vector<data::Example> out;
  for (size_t i = 0; i < lens.size(); ++i) {
    data::Example e;
    e.src.assign(lens[i].first, 7);
    e.tgt.assign(lens[i].second, 8);
    e.id = static_cast<int64_t>(i);
    out.push_back(e);
  }
  return out;
}

TEST(Batching, TokenBudgetLengthSortingAndCoverage) {
  std::vector<std::pair<int, int>> lens;
  for (int i = 0; i < 200; ++i) lens.push_back({1 + (i * 37) % 50, 1 + (i * 53) % 45});
  const auto ex = examples_of_lengths(lens);
  const auto batches = data::make_batches(ex, 256, 3);
  std::vector<int> seen(ex.size(), 0);
  for (const auto& b : batches) {
    size_t longest = 0;
    for (auto i : b) {
      ++seen[i];
      longest = std::max({longest, ex[i].src.size() + 1, ex[i].tgt.size() + 1});
    }
    EXPECT_LE(longest * b.size(), 256u);  // padded tokens within the budget
  }
  for (int s : seen) EXPECT_EQ(s, 1);                  // every example exactly once
  EXPECT_EQ(data::make_batches(ex, 256, 3), batches);  // deterministic
  // Epoch orders are permutations, differ between epochs, repeat for the same epoch.
  const auto o1 = data::epoch_order(static_cast<int64_t>(batches.size()), 3, 0);
  const auto o2 = data::epoch_order(static_cast<int64_t>(batches.size()), 3, 1);
  EXPECT_NE(o1, o2);
  EXPECT_EQ(o1, data::epoch_order(static_cast<int64_t>(batches.size()), 3, 0));
  auto sorted = o1;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], static_cast<int64_t>(i));
  // A pair longer than the budget is a clear error.
  EXPECT_THROW(data::make_batches(examples_of_lengths({{300, 2}}), 256, 1), Error);
}

TEST(Batching, CollateAddsEosBosAndPadding) {
  std::vector<data::Example> ex(2);
  ex[0].src = {10, 11};
  ex[0].tgt = {20};
  ex[1].src = {12};
  ex[1].tgt = {21, 22, 23};
  const auto b = data::collate(ex, {0, 1}, torch::kCPU);
  using data::kBosId, data::kEosId, data::kPadId;
  EXPECT_TRUE(torch::equal(
      b.src, torch::tensor({{10, 11, kEosId}, {12, kEosId, kPadId}}).to(torch::kInt64)));
  EXPECT_TRUE(torch::equal(
      b.tgt_in,
      torch::tensor({{kBosId, 20, kPadId, kPadId}, {kBosId, 21, 22, 23}}).to(torch::kInt64)));
  EXPECT_TRUE(torch::equal(
      b.tgt_out,
      torch::tensor({{20, kEosId, kPadId, kPadId}, {21, 22, 23, kEosId}}).to(torch::kInt64)));
  EXPECT_EQ(b.tgt_tokens, 6);
  EXPECT_EQ(b.src_tokens, 5);
}

TEST(Loss, DistillationIsTemperatureScaledKlByHand) {
  // One real position with two classes, one padding position that must not count. Student
  // logits (0, 0), teacher (ln 3, 0): at T = 1 the teacher's distribution is (3/4, 1/4), the
  // student's (1/2, 1/2), KL = 3/4 ln(3/2) + 1/4 ln(1/2). At T = 2 the teacher's logits become
  // (ln 3 / 2, 0): p = (sqrt 3, 1) / (sqrt 3 + 1), and the term is multiplied by T^2 = 4.
  auto student = torch::zeros({1, 2, 2}, torch::requires_grad());
  const auto teacher = torch::tensor({{{std::log(3.0f), 0.0f}, {5.0f, -5.0f}}});
  const auto target = torch::tensor({{4, data::kPadId}}).to(torch::kInt64);
  const auto kl1 = model::distillation_loss(student, teacher, target, 1.0);
  EXPECT_NEAR(kl1.item<double>(), 0.75 * std::log(1.5) + 0.25 * std::log(0.5), 1e-6);
  const double r3 = std::sqrt(3.0), p0 = r3 / (r3 + 1), p1 = 1 / (r3 + 1);
  const auto kl2 = model::distillation_loss(student, teacher, target, 2.0);
  EXPECT_NEAR(kl2.item<double>(), 4 * (p0 * std::log(2 * p0) + p1 * std::log(2 * p1)), 1e-6);
  // Its gradient: T (softmax(s / T) - softmax(t / T)) at real positions, 0 at padding.
  kl2.backward();
  const auto g = student.grad();
  EXPECT_NEAR(g[0][0][0].item<double>(), 2 * (0.5 - p0), 1e-6);
  EXPECT_NEAR(g[0][0][1].item<double>(), 2 * (0.5 - p1), 1e-6);
  EXPECT_EQ(g[0][1].abs().sum().item<double>(), 0.0);
  // bf16 logits give the fp32 value of their rounded inputs, and equal models give 0.
  const auto same = torch::randn({2, 3, 7});
  const auto t3 = torch::tensor({{4, 5, 6}, {7, data::kPadId, data::kPadId}}).to(torch::kInt64);
  EXPECT_EQ(model::distillation_loss(same, same, t3, 1.5).item<double>(), 0.0);
  EXPECT_NEAR(
      model::distillation_loss(student.to(torch::kBFloat16), teacher, target, 1.0).item<double>(),
      kl1.item<double>(), 1e-6);
}

TEST(Loss, LabelSmoothingByFormulaAndAgainstLibTorch) {
  torch::manual_seed(0);
  auto logits = torch::randn({2, 3, 6});
  auto target = torch::tensor({{4, 5, data::kPadId}, {1, 4, 5}}).to(torch::kInt64);
  const double eps = 0.1;
  const auto ls = model::label_smoothed_loss(logits, target, eps);
  EXPECT_EQ(ls.tokens, 5);
  // By hand: (1 - eps) * -log p(y) + eps * mean_v -log p(v), over the 5 real tokens.
  auto lp = torch::log_softmax(logits, -1);
  double expect_loss = 0, expect_nll = 0;
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 3; ++t) {
      const int64_t y = target[b][t].item<int64_t>();
      if (y == data::kPadId) continue;
      const double nll = -lp[b][t][y].item<double>();
      expect_nll += nll;
      expect_loss += (1 - eps) * nll + eps * -lp[b][t].mean().item<double>();
    }
  }
  EXPECT_NEAR(ls.nll.item<double>(), expect_nll, 1e-4);
  EXPECT_NEAR(ls.loss.item<double>(), expect_loss, 1e-4);
  // LibTorch's own label-smoothed cross-entropy (sum, ignoring padding) agrees.
  namespace F = torch::nn::functional;
  const auto ref = F::cross_entropy(logits.view({-1, 6}), target.view({-1}),
                                    F::CrossEntropyFuncOptions()
                                        .ignore_index(data::kPadId)
                                        .label_smoothing(eps)
                                        .reduction(torch::kSum));
  EXPECT_NEAR(ls.loss.item<double>(), ref.item<double>(), 1e-4);
}

TEST(Loss, GradientsOfLossAndNllMatchLibTorchCrossEntropy) {
  // The loss has a hand-written backward; LibTorch's cross_entropy (with and without label
  // smoothing, padding ignored) differentiated by autograd is the reference.
  torch::manual_seed(1);
  namespace F = torch::nn::functional;
  const int64_t V = 11;
  auto target = torch::tensor({{3, 7, 10, data::kPadId}, {1, data::kPadId, data::kPadId, 2}})
                    .to(torch::kInt64);
  const auto base = torch::randn({2, 4, V}) * 3;
  for (const double eps : {0.0, 0.1, 0.3}) {
    for (const double w_nll : {0.0, 0.7}) {
      auto mine_in = base.clone().requires_grad_(true);
      auto ref_in = base.clone().requires_grad_(true);
      const auto ls = model::label_smoothed_loss(mine_in, target, eps);
      (ls.loss + w_nll * ls.nll).backward();
      const auto opts =
          F::CrossEntropyFuncOptions().ignore_index(data::kPadId).reduction(torch::kSum);
      const auto ref_loss = F::cross_entropy(ref_in.view({-1, V}), target.view({-1}),
                                             F::CrossEntropyFuncOptions(opts).label_smoothing(eps));
      const auto ref_nll = F::cross_entropy(ref_in.view({-1, V}), target.view({-1}), opts);
      (ref_loss + w_nll * ref_nll).backward();
      EXPECT_NEAR(ls.loss.item<double>(), ref_loss.item<double>(), 1e-4);
      EXPECT_NEAR(ls.nll.item<double>(), ref_nll.item<double>(), 1e-4);
      EXPECT_TRUE(torch::allclose(mine_in.grad(), ref_in.grad(), 1e-5, 1e-6))
          << "eps " << eps << " w_nll " << w_nll;
      // Padding positions get no gradient.
      EXPECT_EQ(mine_in.grad()[0][3].abs().sum().item<float>(), 0.f);
    }
  }
  // The NLL alone (as Michel's importance uses it) also has the right gradient.
  auto mine_in = base.clone().requires_grad_(true);
  auto ref_in = base.clone().requires_grad_(true);
  model::label_smoothed_loss(mine_in, target, 0.1).nll.backward();
  F::cross_entropy(ref_in.view({-1, V}), target.view({-1}),
                   F::CrossEntropyFuncOptions().ignore_index(data::kPadId).reduction(torch::kSum))
      .backward();
  EXPECT_TRUE(torch::allclose(mine_in.grad(), ref_in.grad(), 1e-5, 1e-6));
}

TEST(Loss, Bf16LogitsTakeTheBlockedPathWithTheSameLossAndGradient) {
  // bf16 logits are processed a few rows at a time (here 3, so blocks of 3, 3 and 2 rows); the
  // reference is LibTorch's cross_entropy on the same values in fp32, its gradient rounded to bf16.
  torch::manual_seed(2);
  namespace F = torch::nn::functional;
  const int64_t V = 13;
  auto target =
      torch::tensor({{3, 7, 12, data::kPadId}, {1, 4, data::kPadId, 2}}).to(torch::kInt64);
  const auto base = (torch::randn({2, 4, V}) * 3).to(torch::kBFloat16);
  for (const double eps : {0.0, 0.1}) {
    for (const int64_t rows : {3, 0}) {
      auto mine_in = base.clone().requires_grad_(true);
      auto ref_in = base.to(torch::kFloat32).requires_grad_(true);
      const auto ls = model::label_smoothed_loss(mine_in, target, eps, rows);
      (ls.loss + 0.5 * ls.nll).backward();
      const auto opts =
          F::CrossEntropyFuncOptions().ignore_index(data::kPadId).reduction(torch::kSum);
      const auto ref_loss = F::cross_entropy(ref_in.view({-1, V}), target.view({-1}),
                                             F::CrossEntropyFuncOptions(opts).label_smoothing(eps));
      const auto ref_nll = F::cross_entropy(ref_in.view({-1, V}), target.view({-1}), opts);
      (ref_loss + 0.5 * ref_nll).backward();
      EXPECT_EQ(ls.loss.scalar_type(), torch::kFloat32);
      EXPECT_NEAR(ls.loss.item<double>(), ref_loss.item<double>(), 1e-4) << eps << " " << rows;
      EXPECT_NEAR(ls.nll.item<double>(), ref_nll.item<double>(), 1e-4) << eps << " " << rows;
      ASSERT_EQ(mine_in.grad().scalar_type(), torch::kBFloat16);
      // Equal up to bf16's rounding of the fp32 gradient (2^-8 relative).
      const auto want = ref_in.grad();
      const auto got = mine_in.grad().to(torch::kFloat32);
      EXPECT_TRUE(((got - want).abs() <= want.abs() / 128 + 1e-6).all().item<bool>())
          << got << want;
      EXPECT_EQ(got[0][3].abs().sum().item<float>(), 0.f);  // padding: no gradient
    }
  }
}

TEST(Loss, BlocksAreCacheSizedOnTheCpuAndOneWholeBlockOnAGpu) {
  // 2^19 fp32 values a block on the CPU: 65 rows of an 8,000-piece vocabulary (2 MB).
  EXPECT_EQ(model::default_loss_block_rows(torch::Device(torch::kCPU), 8192, 8000), 65);
  EXPECT_EQ(model::default_loss_block_rows(torch::Device(torch::kCPU), 8192, 1 << 20), 1);
  // On a GPU every row in one block (the devices are only named here: nothing is allocated).
  EXPECT_EQ(model::default_loss_block_rows(torch::Device(torch::kCUDA, 0), 8192, 8000), 8192);
  EXPECT_EQ(model::default_loss_block_rows(torch::Device(torch::kCUDA, 1), 0, 8000), 1);
  // One whole block gives the blocked path's loss and gradient (bf16 logits, on the CPU).
  torch::manual_seed(3);
  const int64_t V = 11;
  const auto target = torch::tensor({{2, 5, data::kPadId}, {9, 1, 4}}).to(torch::kInt64);
  const auto base = (torch::randn({2, 3, V}) * 2).to(torch::kBFloat16);
  auto whole_in = base.clone().requires_grad_(true);
  auto blocked_in = base.clone().requires_grad_(true);
  const auto whole = model::label_smoothed_loss(whole_in, target, 0.1, 6);
  const auto blocked = model::label_smoothed_loss(blocked_in, target, 0.1, 1);
  whole.loss.backward();
  blocked.loss.backward();
  EXPECT_NEAR(whole.loss.item<double>(), blocked.loss.item<double>(), 1e-5);
  EXPECT_TRUE(torch::equal(whole_in.grad(), blocked_in.grad()));
}

TEST(Training, TinyModelLearnsToTranslateItsTrainingSentences) {
  TempDir dir;
  Config c = tiny_run_config(dir, 8);
  c.model.d_model = 64;
  c.model.ffn_dim = 128;
  c.model.heads = 4;
  train::TrainOptions o;
  o.run_dir = dir / "run";
  const auto s = train::train_command(c, o);
  EXPECT_EQ(s.steps, 300);
  // Dev = training sentences: translated exactly.
  EXPECT_GT(s.best_score, 95.0);
  // The last checkpoint decodes them with beam search too, through the public path.
  const auto info = run::read_checkpoint_info(dir / "run" / "checkpoints" / "last");
  auto m = run::load_model(info, torch::kCPU);
  const auto vocab = data::Vocab::load(info.vocab.src_model);
  auto [es, en] = number_pairs(8, 0);
  std::vector<std::vector<int>> ids;
  for (const auto& s : es) ids.push_back(vocab.encode(s));
  decode::SearchOptions so;
  so.beam = 3;
  const auto out = decode::translate_ids(m, ids, so, 4, torch::kCPU);
  int exact = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto got = vocab.decode(std::vector<int>(out[i].begin(), out[i].end()));
    exact += got == en[i];
    EXPECT_EQ(got, en[i]) << "beam 3, sentence " << i;
  }
  EXPECT_EQ(exact, 8);
  // metrics.jsonl: train lines every 10 steps, eval lines every 100.
  int train_lines = 0, eval_lines = 0;
  for (const auto& line : io::read_lines(dir / "run" / "metrics.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    train_lines += j["event"] == "train";
    eval_lines += j["event"] == "eval";
  }
  EXPECT_EQ(train_lines, 30);
  EXPECT_EQ(eval_lines, 3);
}

TEST(Checkpoint, RoundTripGivesIdenticalLogitsAndRejectsBadInput) {
  TempDir dir;
  Config c = tiny_run_config(dir, 32);
  c.train.max_steps = 20;
  c.train.eval_every = 20;
  train::TrainOptions o;
  o.run_dir = dir / "run";
  train::Trainer trainer(c, o);
  trainer.run();
  const auto info = run::read_checkpoint_info(dir / "run" / "checkpoints" / "last");
  EXPECT_EQ(info.state.step, 20);
  EXPECT_EQ(info.architecture, trainer.model()->architecture());
  auto loaded = run::load_model(info, torch::kCPU);
  trainer.model()->eval();
  loaded->eval();
  auto src = torch::randint(4, info.src_vocab_size, {3, 5});
  auto tgt = torch::randint(4, info.tgt_vocab_size, {3, 4});
  EXPECT_TRUE(torch::equal(trainer.model()->forward(src, tgt), loaded->forward(src, tgt)));
  // The weights file is a pickled dict that names every parameter.
  const auto weights = run::load_weights_file(info.dir / "model.pt");
  EXPECT_EQ(weights.size(), trainer.model()->parameters().size());

  auto expect_error = [](const fs::path& p, const std::string& needle) {
    try {
      run::read_checkpoint_info(p);
      ADD_FAILURE() << "no error for " << p;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(dir / "nope", "not found");
  // A corrupt weights file.
  fs::copy(info.dir, dir / "corrupt", fs::copy_options::recursive);
  std::ofstream(dir / "corrupt" / "model.pt") << "garbage";
  auto cinfo = run::read_checkpoint_info(dir / "corrupt");
  try {
    run::load_model(cinfo, torch::kCPU);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    // (Its hash no longer matches meta.json's: found before it is unpickled.)
    EXPECT_NE(std::string(e.what()).find("model.pt: damaged"), std::string::npos) << e.what();
  }
  // Missing pieces.
  fs::copy(info.dir, dir / "partial", fs::copy_options::recursive);
  fs::remove(dir / "partial" / "architecture.json");
  expect_error(dir / "partial", "architecture.json is missing");
}

// The loss of every logged step, the last occurrence of each step winning.
std::map<int64_t, double> train_losses(const fs::path& metrics) {
  std::map<int64_t, double> out;
  for (const auto& line : io::read_lines(metrics, {.allow_empty_file = true})) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

// Runs `c` once uninterrupted and once killed with SIGKILL as soon as its `last` checkpoint has
// reached `kill_after` steps, then resumed; the two loss curves must be identical. `killed_at`:
// the step of the checkpoint the run resumed from.
void expect_kill_and_resume_on_same_curve(const TempDir& dir, const Config& c, int64_t kill_after,
                                          int64_t* killed_at) {
  save_config(c, dir / "config.yaml");
  const std::string bin = HEADCOUNT_BINARY;
  // Uninterrupted reference.
  ASSERT_EQ(std::system(fmt::format("{} train {} --out {} >/dev/null 2>&1", bin,
                                    (dir / "config.yaml").string(), (dir / "ref").string())
                            .c_str()),
            0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    execl(bin.c_str(), bin.c_str(), "train", (dir / "config.yaml").c_str(), "--out",
          (dir / "killed").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const fs::path state = dir / "killed" / "checkpoints" / "last" / "state.json";
  bool killed = false;
  for (int i = 0; i < 600 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::error_code ec;
    if (fs::exists(state, ec)) {
      try {
        const auto step = nlohmann::json::parse(io::read_file(state))["step"].get<int64_t>();
        if (step >= kill_after) {
          kill(pid, SIGKILL);
          killed = true;
          *killed_at = step;
        }
      } catch (...) {
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(killed) << "the run finished before it could be killed";
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(std::system(fmt::format("{} train {} --out {} >/dev/null 2>&1", bin,
                                    (dir / "config.yaml").string(), (dir / "killed").string())
                            .c_str()),
            0);
  const auto ref = train_losses(dir / "ref" / "metrics.jsonl");
  const auto resumed = train_losses(dir / "killed" / "metrics.jsonl");
  ASSERT_EQ(ref.size(), static_cast<size_t>(c.train.max_steps / c.train.log_every));
  ASSERT_EQ(resumed.size(), ref.size());
  for (const auto& [step, loss] : ref) EXPECT_DOUBLE_EQ(resumed.at(step), loss) << "step " << step;
}

TEST(Training, KilledRunResumesOnTheSameLossCurve) {
  TempDir dir;
  Config c = tiny_run_config(dir, 64);
  c.model.dropout = 0.1;  // the resumed run must restore the random state too
  c.train.max_steps = 120;
  c.train.eval_every = 20;
  c.train.log_every = 5;
  int64_t killed_at = 0;
  expect_kill_and_resume_on_same_curve(dir, c, 40, &killed_at);
}

// A fine-tuning method that evaluates before its first step, where a stop request arrives (as a
// Ctrl-C during a pruning run's start-up would); counts the steps it regularises.
class StopDuringTheFirstEvaluation : public train::TrainingExtension {
 public:
  StopDuringTheFirstEvaluation(bool ask, int* steps) : ask_(ask), steps_(steps) {}
  std::vector<train::ParamGroup> parameter_groups(model::Transformer& model,
                                                  const torch::Device&) override {
    return {{model->parameters(), std::nullopt}};
  }
  train::Regulariser regulariser(int64_t) override {
    ++*steps_;
    return {};
  }
  bool evaluate_at_start() const override { return true; }
  void begin_evaluation() override {
    if (ask_) StopSignals::request();
  }

 private:
  bool ask_;
  int* steps_;
};

TEST(Training, AStopDuringTheStartingEvaluationIsHonouredBeforeTheFirstStep) {
  TempDir dir;
  Config c = tiny_run_config(dir, 16);
  c.train.max_steps = 6;
  c.train.eval_every = 3;
  train::TrainOptions o;
  o.run_dir = dir / "run";
  int steps = 0;
  {
    train::Trainer t(c, o, std::make_unique<StopDuringTheFirstEvaluation>(true, &steps));
    const auto s = t.run();
    EXPECT_TRUE(s.interrupted);
    EXPECT_EQ(s.steps, 0);
  }
  EXPECT_EQ(steps, 0);  // not one training step
  EXPECT_TRUE(fs::exists(dir / "run" / "checkpoints" / "last"));
  EXPECT_FALSE(fs::exists(dir / "run" / "summary.json"));
  // The same command again resumes from step 0 and finishes.
  train::Trainer t(c, o, std::make_unique<StopDuringTheFirstEvaluation>(false, &steps));
  const auto s = t.run();
  EXPECT_FALSE(s.interrupted);
  EXPECT_EQ(s.steps, 6);
  EXPECT_EQ(steps, 6);
  EXPECT_TRUE(fs::exists(dir / "run" / "summary.json"));
}

// A bf16 run resumes like an fp32 one (its checkpoints hold fp32 weights and Adam state in the
// unchanged format), and its summary says which precision ran and why.
TEST(Training, Bf16RunResumesOnTheSameLossCurveFromFp32Checkpoints) {
  if (cpu_native_bf16().empty()) GTEST_SKIP() << "no native bf16 arithmetic on this CPU";
  TempDir dir;
  Config c = tiny_run_config(dir, 64);
  c.model.dropout = 0.1;
  c.train.precision = "bf16";
  c.train.max_steps = 120;
  c.train.eval_every = 20;
  c.train.log_every = 5;
  int64_t killed_at = 0;
  expect_kill_and_resume_on_same_curve(dir, c, 40, &killed_at);
  const auto last = dir / "killed" / "checkpoints" / "last";
  for (const auto& [name, w] : run::load_weights_file(last / "model.pt"))
    EXPECT_EQ(w.scalar_type(), torch::kFloat32) << name;
  const auto summary = nlohmann::json::parse(io::read_file(dir / "killed" / "summary.json"));
  EXPECT_EQ(summary["precision"], "bf16");
  EXPECT_NE(summary["precision_reason"].get<std::string>().find("train.precision: bf16"),
            std::string::npos);
  // The same run in fp32 takes another path: its losses differ (bf16 really ran).
  TempDir dir32;
  Config c32 = c;
  c32.train.precision = "fp32";
  train::TrainOptions o;
  o.run_dir = dir32 / "run";
  train::train_command(c32, o);
  const auto l16 = train_losses(dir / "ref" / "metrics.jsonl");
  const auto l32 = train_losses(dir32 / "run" / "metrics.jsonl");
  ASSERT_EQ(l16.size(), l32.size());
  EXPECT_NE(l16.rbegin()->second, l32.rbegin()->second);
  EXPECT_NEAR(l16.begin()->second, l32.begin()->second, 0.05 * l32.begin()->second);
}

TEST(Training, SaveEveryCheckpointsBetweenEvaluationsAndResumesFromThere) {
  TempDir dir;
  Config c = tiny_run_config(dir, 64);
  c.model.dropout = 0.1;
  c.train.max_steps = 120;
  c.train.eval_every = 100;  // the kill comes long before the first evaluation
  c.train.save_every = 7;    // saved at the next log line: steps 10, 20, 30, ...
  c.train.log_every = 5;
  int64_t killed_at = 0;
  expect_kill_and_resume_on_same_curve(dir, c, 14, &killed_at);
  // It resumed from a save between evaluations (without save_every, `last` would first appear at
  // the evaluation of step 100), taken at a log line.
  EXPECT_LT(killed_at, 100);
  EXPECT_EQ(killed_at % c.train.log_every, 0);
  // step-N checkpoints are still only those of evaluations.
  EXPECT_TRUE(fs::exists(dir / "killed" / "checkpoints" / "step-100"));
  EXPECT_FALSE(fs::exists(dir / "killed" / "checkpoints" / "step-20"));
}

TEST(Training, RefusesToOverwriteAForeignFolderOrAnotherConfig) {
  TempDir dir;
  Config c = tiny_run_config(dir, 16);
  c.train.max_steps = 5;
  c.train.eval_every = 5;
  save_config(c, dir / "a.yaml");
  fs::create_directories(dir / "busy");
  std::ofstream(dir / "busy" / "notes.txt") << "precious";
  const std::string bin = HEADCOUNT_BINARY;
  EXPECT_NE(std::system(fmt::format("{} train {} --out {} 2>/dev/null", bin,
                                    (dir / "a.yaml").string(), (dir / "busy").string())
                            .c_str()),
            0);
  EXPECT_EQ(io::read_file(dir / "busy" / "notes.txt"), "precious");
  ASSERT_EQ(std::system(fmt::format("{} train {} --out {} >/dev/null 2>&1", bin,
                                    (dir / "a.yaml").string(), (dir / "run").string())
                            .c_str()),
            0);
  c.model.d_model = 48;
  save_config(c, dir / "b.yaml");
  EXPECT_NE(std::system(fmt::format("{} train {} --out {} 2>/dev/null", bin,
                                    (dir / "b.yaml").string(), (dir / "run").string())
                            .c_str()),
            0);
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

TEST(Training, ArchitectureFromTrainsAPrunedLayoutFromScratch) {
  TempDir dir;
  Config c = tiny_run_config(dir, 16);
  c.model.encoder_layers = 2;
  c.train.max_steps = 4;
  c.train.eval_every = 4;
  train::TrainOptions o;
  o.run_dir = dir / "full";
  train::train_command(c, o);
  // A "pruned" architecture: encoder layer 0 keeps 1 head, layer 1 none; the decoder's
  // encoder-decoder attention none. (Written beside no meta.json, as a run's records hold it: in a
  // checkpoint, an architecture.json edited by hand is an error against its recorded hash.)
  const fs::path ckpt = dir / "pruned";
  fs::create_directories(ckpt);
  auto arch = nlohmann::json::parse(
      io::read_file(dir / "full" / "checkpoints" / "last" / "architecture.json"));
  arch["enc_self"] = {1, 0};
  arch["enc_dec"] = {0};
  io::write_file_atomic(ckpt / "architecture.json", arch.dump());
  o.run_dir = dir / "scratch";
  o.architecture_from = ckpt;
  const auto s = train::train_command(c, o);
  EXPECT_EQ(s.steps, 4);
  const auto info = run::read_checkpoint_info(dir / "scratch" / "checkpoints" / "last");
  EXPECT_EQ(info.architecture.enc_self, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(info.architecture.enc_dec, (std::vector<int64_t>{0}));
  EXPECT_EQ(info.architecture.summary(), "1/2/0");
  auto m = run::load_model(info, torch::kCPU);
  EXPECT_EQ(m->encoder_layers[1]->self_attn->num_heads(), 0);

  // Only the architecture is needed: a run's records folder (architecture.json without weights)
  // and the file itself give the same layout; anything else is a clear error.
  const fs::path records = dir / "records";
  fs::create_directories(records);
  fs::copy_file(ckpt / "architecture.json", records / "architecture.json");
  EXPECT_EQ(run::read_architecture(records).summary(), "1/2/0");
  EXPECT_EQ(run::read_architecture(records / "architecture.json").enc_self,
            (std::vector<int64_t>{1, 0}));
  o.run_dir = dir / "from-records";
  o.architecture_from = records;
  train::train_command(c, o);
  EXPECT_EQ(run::read_checkpoint_info(dir / "from-records" / "checkpoints" / "last")
                .architecture.summary(),
            "1/2/0");
  const auto missing = testing::error_of([&] { run::read_architecture(dir / "nothing-here"); });
  EXPECT_NE(missing.find("no architecture found"), std::string::npos) << missing;
  io::write_file_atomic(records / "architecture.json", "{\"enc_self\": [1,");
  const auto corrupt = testing::error_of([&] { run::read_architecture(records); });
  EXPECT_NE(corrupt.find("not a valid architecture"), std::string::npos) << corrupt;
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

TEST(Checkpoint, PythonTorchLoadReadsTheWeights) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    if (testing::running_in_ci()) FAIL() << "python3-torch missing: the set-up must install it";
    GTEST_SKIP() << "Debian's python3-torch is not installed";
  }
  TempDir dir;
  Config c = tiny_run_config(dir, 16);
  c.train.max_steps = 2;
  c.train.eval_every = 2;
  train::TrainOptions o;
  o.run_dir = dir / "run";
  train::Trainer trainer(c, o);
  trainer.run();
  const fs::path weights = dir / "run" / "checkpoints" / "last" / "model.pt";
  const std::string script = fmt::format(
      "import torch\n"
      "# weights_only: what torch.load does by default from PyTorch 2.6 on (tensors and plain\n"
      "# containers only); 1.13 has the argument too.\n"
      "d = torch.load('{}', weights_only=True)\n"
      "assert isinstance(d, dict)\n"
      "print(len(d), tuple(d['decoder.0.cross_attn.in_proj_weight'].shape), "
      "float(d['src_embed.weight'].sum()))\n",
      weights.string());
  io::write_file_atomic(dir / "check.py", script);
  FILE* p =
      popen(fmt::format("/usr/bin/python3 {} 2>&1", (dir / "check.py").string()).c_str(), "r");
  char buf[512] = {0};
  const size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  ASSERT_EQ(pclose(p), 0) << std::string(buf, n);
  const auto m = trainer.model();
  const std::string expected = fmt::format("{} (96, 32) ", m->parameters().size());
  EXPECT_EQ(std::string(buf, n).rfind(expected, 0), 0u) << std::string(buf, n);
  // The sum Python sees is the sum of the C++ tensor.
  const double sum = std::stod(std::string(buf, n).substr(expected.size()));
  EXPECT_NEAR(sum, m->src_embed->weight.sum().item<double>(), 1e-3);
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

TEST(Cli, TranslateAndEvalWithACheckpoint) {
  TempDir dir;
  Config c = tiny_run_config(dir, 8);
  c.model.d_model = 64;
  c.model.ffn_dim = 128;
  c.model.heads = 4;
  train::TrainOptions o;
  o.run_dir = dir / "run";
  train::train_command(c, o);
  const std::string bin = HEADCOUNT_BINARY;
  const std::string ckpt = (dir / "run" / "checkpoints" / "last").string();
  auto [es, en] = number_pairs(8, 0);
  io::write_lines_atomic(dir / "in.es", {es[0], es[1]});
  ASSERT_EQ(std::system(fmt::format("{} translate --checkpoint {} --beam 3 < {} > {} 2>/dev/null",
                                    bin, ckpt, (dir / "in.es").string(), (dir / "out.en").string())
                            .c_str()),
            0);
  EXPECT_EQ(io::read_lines(dir / "out.en"), (std::vector<std::string>{en[0], en[1]}));
  // eval on the test split (= the training sentences here): BLEU 100 with its signature.
  ASSERT_EQ(std::system(fmt::format("{} eval --checkpoint {} --split test --out {} >/dev/null 2>&1",
                                    bin, ckpt, (dir / "eval.json").string())
                            .c_str()),
            0);
  const auto j = nlohmann::json::parse(io::read_file(dir / "eval.json"));
  EXPECT_EQ(j["sentences"], 8);
  EXPECT_DOUBLE_EQ(j["scores"]["ref1"]["bleu"].get<double>(), 100.0);
  EXPECT_EQ(j["scores"]["ref1"]["bleu_signature"],
            "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  EXPECT_DOUBLE_EQ(j["scores"]["ref1"]["chrf"].get<double>(), 100.0);
  // The precision that decoded and the device (decode.precision auto: bf16 only where native).
  EXPECT_EQ(j["precision"], cpu_native_bf16().empty() ? "fp32" : "bf16");
  EXPECT_EQ(j["device"], "cpu");
  // Given files instead of a split; a missing checkpoint is a one-line error.
  ASSERT_EQ(
      std::system(fmt::format("{} eval --checkpoint {} --src {} --ref {} --out {} >/dev/null 2>&1",
                              bin, ckpt, (dir / "in.es").string(), (dir / "out.en").string(),
                              (dir / "files.json").string())
                      .c_str()),
      0);
  EXPECT_EQ(nlohmann::json::parse(io::read_file(dir / "files.json"))["sentences"], 2);
  EXPECT_NE(std::system(fmt::format("{} translate --checkpoint {} < /dev/null 2>/dev/null", bin,
                                    (dir / "nope").string())
                            .c_str()),
            0);
}

// eval --tune-length-penalty: the alpha chosen is the first of the best dev BLEU among separate
// `eval --split dev --length-penalty A` runs, and the split is scored as `eval --length-penalty`
// with that alpha scores it.
TEST(Cli, EvalTunesTheLengthPenaltyOnDev) {
  TempDir dir;
  const auto ckpt = train_tiny_model(dir, 60).string();  // under-trained: lengths vary
  const std::string bin = HEADCOUNT_BINARY;
  const auto eval = [&](const std::string& args, const std::string& out) {
    EXPECT_EQ(std::system(fmt::format("{} eval --checkpoint {} --beam 4 {} --out {} > {}.txt 2>&1",
                                      bin, ckpt, args, (dir / out).string(), (dir / out).string())
                              .c_str()),
              0)
        << io::read_file(dir / (out + ".txt"));
    return nlohmann::json::parse(io::read_file(dir / out));
  };
  const std::vector<std::string> alphas = {"0", "1.5", "4"};
  std::map<std::string, double> dev;
  std::string want;
  for (const auto& a : alphas) {
    dev[a] =
        eval("--split dev --length-penalty " + a, "dev-" + a + ".json")["scores"]["ref1"]["bleu"]
            .get<double>();
    if (want.empty() || dev[a] > dev[want]) want = a;
  }
  EXPECT_LT(std::min({dev["0"], dev["1.5"], dev["4"]}), dev[want])
      << "the alphas decode alike: the choice would not be tested";
  const auto tuned = eval("--split test --tune-length-penalty 0,1.5,4", "tuned.json");
  EXPECT_DOUBLE_EQ(tuned["length_penalty"].get<double>(), std::stod(want));
  // The record keeps every alpha tried with its dev score, in the order given.
  ASSERT_EQ(tuned["length_penalty_tuning"].size(), alphas.size()) << tuned.dump(2);
  for (size_t i = 0; i < alphas.size(); ++i) {
    const auto& t = tuned["length_penalty_tuning"][i];
    EXPECT_DOUBLE_EQ(t["length_penalty"].get<double>(), std::stod(alphas[i]));
    EXPECT_DOUBLE_EQ(t["dev_bleu"].get<double>(), dev[alphas[i]]) << alphas[i];
  }
  const auto direct = eval("--split test --length-penalty " + want, "direct.json");
  EXPECT_FALSE(direct.contains("length_penalty_tuning"));  // given, not tuned
  EXPECT_DOUBLE_EQ(tuned["scores"]["ref1"]["bleu"].get<double>(),
                   direct["scores"]["ref1"]["bleu"].get<double>());
  const std::string printed = io::read_file(dir / "tuned.json.txt");
  for (const auto& a : alphas)
    EXPECT_NE(printed.find(fmt::format("dev with length penalty {}: BLEU {:.2f}", a, dev[a])),
              std::string::npos)
        << printed;
  EXPECT_NE(printed.find(fmt::format("length penalty {}: the best dev BLEU", want)),
            std::string::npos)
      << printed;
  // Either other way of setting the penalty beside it: a clear error.
  for (const std::string other : {"--length-penalty 1", "--set decode.length_penalty=1"}) {
    const fs::path log = dir / "both.txt";
    EXPECT_NE(
        std::system(fmt::format("{} eval --checkpoint {} {} --tune-length-penalty 0,1 > {} 2>&1",
                                bin, ckpt, other, log.string())
                        .c_str()),
        0)
        << other;
    EXPECT_NE(io::read_file(log).find("give it without --length-penalty or --set "
                                      "decode.length_penalty"),
              std::string::npos)
        << other << ": " << io::read_file(log);
  }
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

// train.weight_decay and train.clip_norm act on the model's weights, not on a group that is not
// (the gates): with zero gradients one Adam step with decay 0.1 at rate 0.5 moves a weight of 1.0
// by Adam's formula (below, by hand) and leaves the gate where it was.
TEST(Training, WeightDecayAndClippingLeaveGroupsThatAreNotModelWeightsAlone) {
  auto w = torch::ones({2}, torch::requires_grad());
  auto g = torch::ones({2}, torch::requires_grad());
  const std::vector<train::ParamGroup> groups = {{{w}, std::nullopt, true},
                                                 {{g}, 0.5, /*model_weights=*/false}};
  auto adam =
      train::make_adam(groups, torch::optim::AdamOptions(0.5).betas({0.9, 0.98}).weight_decay(0.1));
  train::set_group_rates(*adam, groups, 0.5);
  w.mutable_grad() = torch::zeros({2});
  g.mutable_grad() = torch::zeros({2});
  adam->step();
  // Adam with L2 decay: grad' = 0 + 0.1 x 1 = 0.1; m = 0.1 x 0.1 = 0.01, v = 0.02 x 0.01 =
  // 2e-4; bias-corrected m = 0.1, v = 0.01; step = 0.5 x 0.1 / (0.1 + 1e-8).
  EXPECT_NEAR(w[0].item<double>(), 1.0 - 0.5 * 0.1 / (0.1 + 1e-8), 1e-6);
  EXPECT_EQ(g[0].item<double>(), 1.0);
  const auto clipped = train::clipped_parameters(groups);
  ASSERT_EQ(clipped.size(), 1u);
  EXPECT_TRUE(clipped[0].is_same(w));
}

}  // namespace
}  // namespace headcount
