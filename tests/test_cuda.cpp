// CUDA against the CPU: a training step, bf16 autocast, gates and pruning, beam search and
// evaluation. Each test skips itself where LibTorch sees no GPU (Debian's LibTorch never does);
// scripts/gpu_check.sh runs them on a GPU machine.
//
// Tolerances: fp32 on the GPU sums in other orders than the CPU (cuBLAS, reductions), so values
// agree to ~1e-6 relative per product and ~1e-5 through a small model: logits and losses within
// 1e-4, gradients within 1e-4 of their tensor's norm. TF32 is off for fp32 matmuls (LibTorch's
// default since 1.12). bf16 autocast rounds each product's inputs to 8 mantissa bits: logits
// within 5% of the fp32 logits' largest magnitude, the loss within 1%.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "headcount/common/precision.h"
#include "headcount/decode/search.h"
#include "headcount/model/loss.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/head_gates.h"
#include "headcount/run/checkpoint.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

constexpr int64_t kVocab = 50;
const torch::Device kCuda(torch::kCUDA);
const torch::Device kCpu(torch::kCPU);

// Two models with the same initial weights: one stays on the CPU, one goes to the GPU.
std::pair<model::Transformer, model::Transformer> twin_models() {
  const auto mc = small_model_config();
  torch::manual_seed(1);
  model::Transformer cpu(mc, model::Architecture::uniform(mc), kVocab, kVocab);
  torch::manual_seed(1);
  model::Transformer gpu(mc, model::Architecture::uniform(mc), kVocab, kVocab);
  gpu->to(kCuda);
  return {cpu, gpu};
}

struct Batch {
  torch::Tensor src, tgt_in, tgt_out;
  Batch to(const torch::Device& d) const { return {src.to(d), tgt_in.to(d), tgt_out.to(d)}; }
};

Batch random_batch() {
  torch::manual_seed(7);
  Batch b;
  b.src = torch::randint(4, kVocab, {3, 7});
  b.tgt_in = torch::randint(4, kVocab, {3, 6});
  b.tgt_out = torch::randint(4, kVocab, {3, 6});
  b.src[2][6] = 0;  // padding
  b.tgt_out[1][5] = 0;
  return b;
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const double n = b.norm().item<double>();
  return (a.to(kCpu) - b.to(kCpu)).norm().item<double>() / std::max(n, 1e-12);
}

TEST(Cuda, TrainingStepGivesTheCpuLossGradientsAndUpdate) {
  SKIP_WITHOUT_CUDA();
  auto [cpu, gpu] = twin_models();
  const auto b = random_batch();
  auto step = [&](model::Transformer& m, const Batch& batch) {
    m->train();
    torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(1e-3));
    adam.zero_grad();
    const auto ls =
        model::label_smoothed_loss(m->forward(batch.src, batch.tgt_in), batch.tgt_out, 0.1);
    (ls.loss / static_cast<double>(ls.tokens)).backward();
    std::vector<torch::Tensor> grads;
    for (const auto& p : m->parameters()) grads.push_back(p.grad().detach().to(kCpu).clone());
    adam.step();
    return std::make_pair(ls.loss.item<double>(), grads);
  };
  const auto [loss_cpu, grads_cpu] = step(cpu, b);
  const auto [loss_gpu, grads_gpu] = step(gpu, b.to(kCuda));
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-4 * loss_cpu);
  const auto names = cpu->named_parameters();
  ASSERT_EQ(grads_cpu.size(), grads_gpu.size());
  for (size_t i = 0; i < grads_cpu.size(); ++i) {
    if (grads_cpu[i].norm().item<double>() > 1e-6) {
      EXPECT_LT(relative_difference(grads_gpu[i], grads_cpu[i]), 1e-4) << names[i].key();
    }
  }
  const auto p_cpu = cpu->parameters(), p_gpu = gpu->parameters();
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    EXPECT_TRUE(torch::allclose(p_gpu[i].to(kCpu), p_cpu[i], 1e-5, 1e-6)) << names[i].key();
  }
}

TEST(Cuda, Bf16AutocastRunsTheProductsInBf16NearFp32) {
  SKIP_WITHOUT_CUDA();
  auto [cpu, gpu] = twin_models();
  cpu->eval();
  gpu->eval();
  const auto b = random_batch();
  const auto want = cpu->forward(b.src, b.tgt_in);
  const auto bc = b.to(kCuda);
  torch::Tensor logits;
  {
    PrecisionScope scope(true, kCuda);
    logits = gpu->forward(bc.src, bc.tgt_in);
  }
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  const double scale = want.abs().max().item<double>();
  EXPECT_LT((logits.to(torch::kFloat32).to(kCpu) - want).abs().max().item<double>(), 0.05 * scale);
  // The loss is fp32 (log-softmax in fp32 from bf16 logits) and within 1%.
  const auto ls = model::label_smoothed_loss(logits, bc.tgt_out, 0.1);
  EXPECT_EQ(ls.loss.scalar_type(), torch::kFloat32);
  const double want_loss = model::label_smoothed_loss(want, b.tgt_out, 0.1).loss.item<double>();
  EXPECT_NEAR(ls.loss.item<double>(), want_loss, 0.01 * want_loss);
}

TEST(Cuda, GatesPenaltyAndPhysicalPruningMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  auto [cpu, gpu] = twin_models();
  const std::vector<model::AttentionType> all(std::begin(model::kAttentionTypes),
                                              std::end(model::kAttentionTypes));
  torch::manual_seed(3);
  prune::HeadGates gates_cpu(cpu, all, prune::HardConcreteOptions{});
  torch::manual_seed(3);
  prune::HeadGates gates_gpu(gpu, all, prune::HardConcreteOptions{});
  gates_gpu->to(kCuda);
  // Spread the gates: some heads closed, some open, some in between.
  {
    torch::NoGradGuard no_grad;
    auto pc = gates_cpu->parameters();
    auto pg = gates_gpu->parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      auto v = torch::linspace(-6, 6, pc[i].numel()).view_as(pc[i]);
      pc[i].copy_(v);
      pg[i].copy_(v.to(kCuda));
    }
  }
  for (auto norm : {PenaltyNorm::kSum, PenaltyNorm::kLayerMean}) {
    EXPECT_NEAR(gates_gpu->penalty(norm).item<double>(), gates_cpu->penalty(norm).item<double>(),
                1e-5)
        << choice_name(norm);
  }
  EXPECT_EQ(gates_gpu->open_heads(), gates_cpu->open_heads());
  cpu->eval();
  gpu->eval();
  gates_cpu->apply_eval();
  gates_gpu->apply_eval();
  const auto b = random_batch();
  const auto bc = b.to(kCuda);
  const auto gated_cpu = cpu->forward(b.src, b.tgt_in);
  const auto gated_gpu = gpu->forward(bc.src, bc.tgt_in);
  EXPECT_TRUE(torch::allclose(gated_gpu.to(kCpu), gated_cpu, 1e-4, 1e-4));
  // Physical pruning on the GPU computes what the gated model computes.
  const auto values = gates_gpu->eval_values();
  gates_gpu->clear();
  auto pruned = prune::prune_heads(gpu, values);
  pruned->eval();
  EXPECT_LT(pruned->architecture().total(), gpu->architecture().total());
  EXPECT_TRUE(torch::allclose(pruned->forward(bc.src, bc.tgt_in).to(kCpu), gated_cpu, 1e-4, 1e-4));
}

TEST(Cuda, GreedyAndBeamSearchGiveTheCpuTranslations) {
  SKIP_WITHOUT_CUDA();
  auto [cpu, gpu] = twin_models();
  torch::manual_seed(11);
  std::vector<std::vector<int>> sources;
  for (int i = 0; i < 10; ++i) {
    std::vector<int> s;
    for (int k = 0; k < 3 + i % 5; ++k) s.push_back(4 + (7 * i + 3 * k) % (kVocab - 4));
    sources.push_back(s);
  }
  for (int beam : {1, 4}) {
    decode::SearchOptions o;
    o.beam = beam;
    o.precision = "fp32";
    const auto on_cpu = decode::translate_ids(cpu, sources, o, 4, kCpu);
    const auto on_gpu = decode::translate_ids(gpu, sources, o, 4, kCuda);
    EXPECT_EQ(on_gpu, on_cpu) << "beam " << beam;
  }
}

TEST(Cuda, EvaluationAndAShortRunMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  testing::TempDir dir;
  const auto ckpt = train_tiny_model(dir, 60);  // on the CPU
  auto evaluate_on = [&](const std::string& device) {
    Config c = tiny_run_config(dir, 64);
    c.device = device;
    train::TrainOptions o;
    o.run_dir = dir / ("eval-" + device);
    o.init_from = ckpt;
    train::Trainer t(c, o);
    return t.evaluate();
  };
  const auto cpu = evaluate_on("cpu");
  const auto gpu = evaluate_on("cuda");
  EXPECT_NEAR(gpu.loss, cpu.loss, 1e-4 * cpu.loss);
  EXPECT_DOUBLE_EQ(gpu.bleu, cpu.bleu);
  EXPECT_EQ(gpu.sentences, cpu.sentences);
  // A whole run on the GPU: it trains, evaluates, writes its checkpoint and summary.
  Config c = tiny_run_config(dir, 64);
  c.device = "cuda";
  c.train.max_steps = 40;
  c.train.eval_every = 20;
  train::TrainOptions o;
  o.run_dir = dir / "run-cuda";
  const auto summary = train::train_command(c, o);
  EXPECT_EQ(summary.steps, 40);
  EXPECT_TRUE(std::filesystem::exists(dir / "run-cuda" / "summary.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "run-cuda" / "checkpoints" / "last" / "model.pt"));
}

}  // namespace
}  // namespace headcount
