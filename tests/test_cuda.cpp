// CUDA against the CPU: a training step, bf16 autocast, gates and pruning, beam search and
// evaluation; the benchmarks and the NCCL group on the GPU. Each test skips itself where LibTorch
// sees no GPU (Debian's LibTorch never does); scripts/gpu_check.sh runs them on a GPU machine.
//
// Tolerances, from the arithmetic. Every comparison with the CPU runs in fp32 on both (no
// autocast; TF32 off, so cuBLAS multiplies in full fp32). Both devices then compute the same
// function and differ only in the order of their sums (cuBLAS's blocking, reductions by tree):
//   - A sum of n fp32 products, in any order, is within gamma_n ~ n*u of the exact one, relative
//     to the sum of the products' magnitudes (u = 2^-24, fp32's unit roundoff; Higham, Accuracy
//     and Stability of Numerical Algorithms, 3.1). Transcendental functions (exp, log, rsqrt) are
//     within ~2 ulp on both devices: a few u more per level, small beside n*u.
//   - To first order the errors of the sums along a chain add up. The longest chain of the test
//     model (2+2 layers, d 32, FFN 64, 4 heads of 8, vocabulary 50, up to 7 positions) to the
//     logits sums ~1,530 terms: an encoder layer projections 32 + scores 8 + mixing 7 + output
//     32 + FFN 32 + 64 + two layer norms 2x2x32 = 239, a decoder layer (self- and
//     cross-attention, FFN, three layer norms) 445, the final norms 128, the output layer 32.
//     The loss adds log-softmax's 50 and the sum over 18 target tokens: ~1,600.
//   - Two implementations differ by at most the sum of their errors: logits and loss within
//     2 x 1,600 u = 1.9e-4 relative to their magnitude (kForwardTol = 2e-4).
//   - Backward retraces the chain (each product's backward sums over its other dimension) and
//     adds the weight-gradient sum over <= 21 tokens: 2 x (2 x 1,600 + 21) u = 3.8e-4
//     (kBackwardTol = 4e-4) relative to the gradient's magnitude, taken as the largest gradient
//     element of the tensor (and at least 1% of the model's largest: a gradient that cancels to
//     ~0, as the key bias's does, keeps the rounding of the terms it summed).
// These are bounds; the observed differences are ~100x smaller (errors of independent roundings
// mostly cancel, ~sqrt(n) u per sum). A GPU that computes something else (a mask, an index, a
// layout, a reduction gone wrong) misses them by orders of magnitude.
//
// Adam's first step is -lr * g / (|g| + eps), about -lr * sign(g): it is not a continuous function
// of g near 0, so where |g| is within the gradient tolerance the two devices may legitimately step
// 2 lr apart. The update is therefore checked (a) on the GPU against that formula of the GPU's
// own gradient, for every element (16 u lr for Adam's ~8 roundings, plus the rounding of p + step),
// and (b) against the CPU's update where |g| > 2 x the gradient tolerance: there the sign is
// settled and the updates differ by at most lr * eps * d / (|g| (|g| - d)) for a gradient
// difference d, plus both devices' roundings.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "headcount/common/io.h"
#include "headcount/common/precision.h"
#include "headcount/decode/search.h"
#include "headcount/dist/distributed.h"
#include "headcount/model/loss.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/head_gates.h"
#include "headcount/run/checkpoint.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

constexpr double kU = 0x1p-24;  // fp32 unit roundoff
constexpr double kForwardTol = 2e-4;
constexpr double kBackwardTol = 4e-4;

// fp32 products in full fp32 on the GPU, whatever LibTorch's default or an earlier test set.
void disable_tf32() {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
}

#define REQUIRE_CUDA()                                                  \
  do {                                                                  \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"; \
    disable_tf32();                                                     \
  } while (0)

constexpr int64_t kVocab = 50;
const torch::Device kCuda(torch::kCUDA);
const torch::Device kCpu(torch::kCPU);

// Two models with the same initial weights: one stays on the CPU, one goes to the GPU. Their
// forward passes outside a PrecisionScope run in fp32.
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

double max_abs(const torch::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.abs().max().item<double>();
}

// The largest elementwise difference of `a` (any device) from `b`, over `b`'s largest magnitude.
double max_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const auto bc = b.to(kCpu, torch::kFloat64);
  return max_abs(a.to(kCpu, torch::kFloat64) - bc) / std::max(max_abs(bc), 1e-30);
}

// One training step as the trainer takes it: loss, gradients, and the parameters before and
// after Adam (all on the CPU, in float64 for the comparisons).
struct StepResult {
  double loss = 0;
  std::vector<torch::Tensor> grads, before, after;
};

StepResult adam_step(model::Transformer& m, const Batch& batch, double lr) {
  m->train();
  torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(lr));
  adam.zero_grad();
  const auto ls =
      model::label_smoothed_loss(m->forward(batch.src, batch.tgt_in), batch.tgt_out, 0.1);
  (ls.loss / static_cast<double>(ls.tokens)).backward();
  StepResult r;
  r.loss = ls.loss.item<double>();
  auto host = [](const torch::Tensor& t) { return t.detach().to(kCpu, torch::kFloat64); };
  for (const auto& p : m->parameters()) {
    r.grads.push_back(host(p.grad()));
    r.before.push_back(host(p));
  }
  adam.step();
  for (const auto& p : m->parameters()) r.after.push_back(host(p));
  return r;
}

TEST(Cuda, TrainingStepGivesTheCpuLossGradientsAndUpdate) {
  REQUIRE_CUDA();
  auto [cpu, gpu] = twin_models();
  const auto b = random_batch();
  const double lr = 1e-3, eps = 1e-8;  // eps: AdamOptions' default
  const auto c = adam_step(cpu, b, lr);
  const auto g = adam_step(gpu, b.to(kCuda), lr);
  EXPECT_NEAR(g.loss, c.loss, kForwardTol * c.loss);
  const auto names = cpu->named_parameters();
  ASSERT_EQ(c.grads.size(), g.grads.size());
  double largest = 0;
  for (const auto& t : c.grads) largest = std::max(largest, max_abs(t));
  ASSERT_GT(largest, 0.0);
  int64_t settled = 0, nonzero = 0;
  for (size_t i = 0; i < c.grads.size(); ++i) {
    const auto& key = names[i].key();
    // Gradients, elementwise, on the tensor's scale.
    const double d = kBackwardTol * std::max(max_abs(c.grads[i]), 0.01 * largest);
    EXPECT_LE(max_abs(g.grads[i] - c.grads[i]), d) << key;
    // (a) The GPU's update is Adam's first step of the GPU's gradient, for every element.
    const auto step_gpu = g.after[i] - g.before[i];
    const auto want = -lr * g.grads[i] / (g.grads[i].abs() + eps);
    const auto rounding =
        16 * kU * lr + 2 * kU * torch::maximum(g.before[i].abs(), g.after[i].abs());
    EXPECT_TRUE((step_gpu - want).abs().le(rounding).all().item<bool>())
        << key << ": largest miss " << max_abs(step_gpu - want);
    // (b) Where |g| > 2d the sign of the step is settled: the CPU's update within the bound.
    const auto step_cpu = c.after[i] - c.before[i];
    const auto ga = c.grads[i].abs();
    const auto mask = ga.gt(2 * d);
    const auto bound = lr * eps * d / (ga * (ga - d)).clamp_min(1e-300) + 32 * kU * lr +
                       2 * kU * torch::maximum(c.after[i].abs(), g.after[i].abs());
    EXPECT_TRUE(
        (step_gpu - step_cpu).abs().le(bound).logical_or(mask.logical_not()).all().item<bool>())
        << key;
    settled += mask.sum().item<int64_t>();
    nonzero += ga.gt(0).sum().item<int64_t>();
  }
  // Not vacuous: most gradient elements are well above the tolerance.
  EXPECT_GT(settled, nonzero / 2) << settled << " of " << nonzero;
}

// bf16 against fp32, on purpose. autocast rounds the inputs of each linear layer to bf16 (8
// significant bits, unit roundoff u_b = 2^-9 = 2e-3) and rounds its output to bf16: ~3
// independent roundings per product, each uniform within +-u_b (standard deviation u_b / sqrt(3)).
// Along the chain to the logits (2 encoder layers x 4 products, 2 decoder layers x 7, the output
// layer: 23) they add like a random walk: standard deviation ~u_b sqrt(23 x 3 / 3) = 1e-2 of the
// magnitudes; the largest of 900 logits' errors is ~3.3 of them, ~3%: 5% of the largest logit.
// The loss averages 18 tokens' errors (and keeps log-softmax in fp32): within 1%.
TEST(Cuda, Bf16AutocastRunsTheProductsInBf16NearFp32) {
  REQUIRE_CUDA();
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
  EXPECT_LT(max_relative_difference(logits, want), 0.05);
  // The loss is fp32 (log-softmax in fp32 from bf16 logits) and within 1%.
  const auto ls = model::label_smoothed_loss(logits, bc.tgt_out, 0.1);
  EXPECT_EQ(ls.loss.scalar_type(), torch::kFloat32);
  const double want_loss = model::label_smoothed_loss(want, b.tgt_out, 0.1).loss.item<double>();
  EXPECT_NEAR(ls.loss.item<double>(), want_loss, 0.01 * want_loss);
}

TEST(Cuda, GatesPenaltyAndPhysicalPruningMatchTheCpu) {
  REQUIRE_CUDA();
  auto [cpu, gpu] = twin_models();
  const std::vector<model::AttentionType> all(std::begin(model::kAttentionTypes),
                                              std::end(model::kAttentionTypes));
  torch::manual_seed(3);
  prune::HeadGates gates_cpu(cpu, all, prune::HardConcreteOptions{});
  torch::manual_seed(3);
  prune::HeadGates gates_gpu(gpu, all, prune::HardConcreteOptions{});
  gates_gpu->to(kCuda);
  // Spread the gates: some heads closed, some open, some in between.
  int64_t gates = 0;
  {
    torch::NoGradGuard no_grad;
    auto pc = gates_cpu->parameters();
    auto pg = gates_gpu->parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      auto v = torch::linspace(-6, 6, pc[i].numel()).view_as(pc[i]);
      pc[i].copy_(v);
      pg[i].copy_(v.to(kCuda));
      gates += pc[i].numel();
    }
  }
  // The penalty sums one positive term per gate (a sigmoid of a log-ratio: ~4 transcendental
  // functions of ~2 ulp each): within 2 x (gates + 8) u of its value, on either device.
  for (auto norm : {PenaltyNorm::kSum, PenaltyNorm::kLayerMean}) {
    const double want = gates_cpu->penalty(norm).item<double>();
    EXPECT_NEAR(gates_gpu->penalty(norm).item<double>(), want,
                2.0 * static_cast<double>(gates + 8) * kU * std::abs(want))
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
  EXPECT_LT(max_relative_difference(gated_gpu, gated_cpu), kForwardTol);
  // Physical pruning on the GPU computes what the gated model computes (its sums are shorter:
  // the same bound holds).
  const auto values = gates_gpu->eval_values();
  gates_gpu->clear();
  auto pruned = prune::prune_heads(gpu, values);
  pruned->eval();
  EXPECT_LT(pruned->architecture().total(), gpu->architecture().total());
  EXPECT_LT(max_relative_difference(pruned->forward(bc.src, bc.tgt_in), gated_cpu), kForwardTol);
}

// fp32 on both; identical tokens unless two hypotheses' scores lie within ~kForwardTol of each
// other, which these sources do not produce.
TEST(Cuda, GreedyAndBeamSearchGiveTheCpuTranslations) {
  REQUIRE_CUDA();
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

// tiny_run_config(dir, 64) trained `steps` steps on the CPU in fp32 into dir/run: its last
// checkpoint.
std::filesystem::path train_on_cpu(const testing::TempDir& dir, int steps) {
  return train_tiny_model(dir, steps, [](Config& c) {
    c.device = "cpu";
    c.train.precision = "fp32";
    c.decode.precision = "fp32";
  });
}

TEST(Cuda, EvaluationMatchesTheCpu) {
  REQUIRE_CUDA();
  testing::TempDir dir;
  const auto ckpt = train_on_cpu(dir, 60);
  auto evaluate_on = [&](const std::string& device) {
    Config c = tiny_run_config(dir, 64);
    c.device = device;
    c.train.precision = "fp32";   // the dev loss
    c.decode.precision = "fp32";  // the translations scored by BLEU
    train::TrainOptions o;
    o.run_dir = dir / ("eval-" + device);
    o.init_from = ckpt;
    train::Trainer t(c, o);
    return t.evaluate();
  };
  const auto cpu = evaluate_on("cpu");
  const auto gpu = evaluate_on("cuda");
  // A smaller model (1+1 layers) than the one kForwardTol is derived for: the bound holds.
  EXPECT_NEAR(gpu.loss, cpu.loss, kForwardTol * cpu.loss);
  EXPECT_NEAR(gpu.nll, cpu.nll, kForwardTol * cpu.nll);
  EXPECT_DOUBLE_EQ(gpu.bleu, cpu.bleu);
  EXPECT_EQ(gpu.sentences, cpu.sentences);
}

// Whole runs on the GPU, compared with nothing: fp32, then the default precision (auto: bf16 on
// CUDA, the path a user takes). Each trains, evaluates, writes its checkpoint and summary.
TEST(Cuda, ShortRunsTrainEvaluateAndSaveInFp32AndTheDefaultPrecision) {
  REQUIRE_CUDA();
  testing::TempDir dir;
  for (const auto& [precision, resolved] :
       std::vector<std::pair<std::string, std::string>>{{"fp32", "fp32"}, {"auto", "bf16"}}) {
    Config c = tiny_run_config(dir, 64);
    c.device = "cuda";
    c.train.precision = precision;
    c.decode.precision = precision;
    c.train.max_steps = 40;
    c.train.eval_every = 20;
    train::TrainOptions o;
    o.run_dir = dir / ("run-" + precision);
    const auto summary = train::train_command(c, o);
    EXPECT_EQ(summary.steps, 40) << precision;
    ASSERT_TRUE(std::filesystem::exists(o.run_dir / "summary.json")) << precision;
    const auto j = nlohmann::json::parse(io::read_file(o.run_dir / "summary.json"));
    EXPECT_EQ(j["precision"], resolved);
    EXPECT_TRUE(std::filesystem::exists(o.run_dir / "checkpoints" / "last" / "model.pt"));
  }
}

// `headcount ARGS` with stdout and stderr apart.
testing::CommandResult headcount(const std::string& args) {
  return testing::run_headcount("", args);
}

// bench train measures the GPU it is given, and the peak of the precision on that GPU.
TEST(Cuda, BenchTrainMeasuresTheGpuAndItsPeak) {
  REQUIRE_CUDA();
  for (const char* precision : {"fp32", "bf16"}) {
    const auto r = headcount(fmt::format(
        "bench train --d-model 64 --layers 2 --heads 4 --ffn 128 --vocab 500 --sentences 16 "
        "--length 16 --steps 3 --warmup 1 --json --set device=cuda --precision {}",
        precision));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["device"], "cuda:0") << precision;
    EXPECT_EQ(j["precision"], precision);
    EXPECT_EQ(j["matmul_peak_size"], 8192);
    // GPU-scale: an H100 multiplies at ~50,000 GFLOP/s in fp32 (no TF32) and ~700,000 in bf16.
    EXPECT_GT(j["matmul_peak_gflops"].get<double>(), 2000.0) << precision;
    EXPECT_NEAR(j["fraction_of_peak"].get<double>(),
                j["achieved_gflops"].get<double>() / j["matmul_peak_gflops"].get<double>(), 1e-9);
    EXPECT_EQ(j["tf32"], false);
  }
  const auto text = headcount(
      "bench train --d-model 16 --layers 1 --heads 2 --ffn 32 --vocab 50 --sentences 2 --length 4 "
      "--steps 1 --warmup 1 --set device=cuda --precision fp32");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("device: cuda:0"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("matmul peak measured now on cuda:0 (8192^3)"), std::string::npos)
      << text.out;
}

TEST(Cuda, BenchDecodeMeasuresTheGpu) {
  REQUIRE_CUDA();
  testing::TempDir dir;
  const auto ckpt = train_on_cpu(dir, 20);
  const auto r = headcount(fmt::format(
      "bench decode --checkpoint {} --set device=cuda --set decode.precision=fp32 --sentences 4 "
      "--beams 1 --repeats 1",
      ckpt.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("device cuda:0"), std::string::npos) << r.out;
}

// A group of one on the GPU: NCCL's set-up, and CPU tensors (the trainer's token and loss sums)
// carried through the GPU and back.
TEST(Cuda, NcclGroupOfOneReducesGpuAndCpuTensors) {
  REQUIRE_CUDA();
  const torch::Device gpu(torch::kCUDA, 0);
  if (dist::backend_for(gpu).empty()) GTEST_SKIP() << "this LibTorch has no NCCL";
  dist::Environment e;
  e.master_port = dist::free_port();
  auto comm = dist::connect(e, gpu, std::chrono::seconds(60));
  auto on_gpu = torch::arange(6, torch::kFloat32).to(gpu);
  auto on_cpu = torch::tensor({12.0, 0.5, 1.0}, torch::kFloat64);
  std::vector<torch::Tensor> v = {on_gpu, on_cpu};
  comm->allreduce_sum(v);
  EXPECT_TRUE(v[0].is_same(on_gpu));
  EXPECT_TRUE(v[1].is_same(on_cpu));
  EXPECT_TRUE(torch::equal(on_gpu.cpu(), torch::arange(6, torch::kFloat32)));
  EXPECT_TRUE(torch::equal(on_cpu, torch::tensor({12.0, 0.5, 1.0}, torch::kFloat64)));
  comm->broadcast(on_cpu, 0);
  comm->barrier();
  // Gradients of CUDA parameters, bucketed.
  auto p = torch::ones({4, 3}, torch::TensorOptions().device(gpu).requires_grad(true));
  (p * 2).sum().backward();
  EXPECT_EQ(dist::allreduce_gradients(*comm, {p}), 12 * 4);
  EXPECT_TRUE(torch::equal(p.grad().cpu(), torch::full({4, 3}, 2.0)));
}

// Two processes on two GPUs (cuda:LOCAL_RANK each) train one model over NCCL.
TEST(Cuda, TwoProcessesTrainOnTwoGpusOverNccl) {
  REQUIRE_CUDA();
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 GPUs";
  if (dist::backend_for(kCuda).empty()) GTEST_SKIP() << "this LibTorch has no NCCL";
  testing::TempDir dir;
  Config c = tiny_run_config(dir, 64);
  c.device = "cuda";
  c.train.precision = "fp32";
  c.decode.precision = "fp32";
  c.train.max_steps = 12;
  c.train.eval_every = 12;
  save_config(c, dir / "cfg.yaml");
  const int code = std::system(fmt::format("{} launch --nproc 2 -- train {} --out {} > {} 2>&1",
                                           HEADCOUNT_BINARY, (dir / "cfg.yaml").string(),
                                           (dir / "two").string(), (dir / "two.log").string())
                                   .c_str());
  const auto log = io::read_file(dir / "two.log");
  ASSERT_EQ(code, 0) << log;
  EXPECT_NE(log.find("rank 0 of 2 (torchrun environment) on cuda:0 (nccl)"), std::string::npos)
      << log;
  const auto j = nlohmann::json::parse(io::read_file(dir / "two" / "summary.json"));
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["parameters_identical_across_processes"], true);
  EXPECT_EQ(j["steps"], 12);
}

}  // namespace
}  // namespace headcount
