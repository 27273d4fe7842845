// Mixed precision: what auto picks and when bf16 is refused, which ops run in bf16 and which stay
// in fp32, and bf16 gradients against fp32 ones. (Resuming a bf16 run: test_train.cpp.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <optional>

#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/common/precision.h"
#include "headcount/common/runtime.h"
#include "headcount/model/loss.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/head_gates.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::error_of;

// Sets HEADCOUNT_CPU_BF16 for the life of the object, then restores it.
class Bf16Env {
 public:
  explicit Bf16Env(const char* value) {
    if (const char* old = std::getenv("HEADCOUNT_CPU_BF16")) old_ = old;
    setenv("HEADCOUNT_CPU_BF16", value, 1);
  }
  ~Bf16Env() {
    if (old_) {
      setenv("HEADCOUNT_CPU_BF16", old_->c_str(), 1);
    } else {
      unsetenv("HEADCOUNT_CPU_BF16");
    }
  }

 private:
  std::optional<std::string> old_;
};

bool cpu_is_native() {
  return !cpu_native_bf16().empty();
}

TEST(Precision, AutoFollowsTheHardwareAndBf16WithoutItIsAClearError) {
  const torch::Device cpu(torch::kCPU);
  const auto fp32 = resolve_precision("fp32", cpu, "train.precision");
  EXPECT_FALSE(fp32.bf16());
  EXPECT_EQ(fp32.name(), "fp32");
  {
    Bf16Env none("0");  // a CPU without avx512_bf16 / AMX
    EXPECT_EQ(cpu_native_bf16(), "");
    const auto a = resolve_precision("auto", cpu, "train.precision");
    EXPECT_FALSE(a.bf16());
    EXPECT_NE(a.reason.find("no native bf16"), std::string::npos) << a.reason;
    const std::string e = error_of([&] { resolve_precision("bf16", cpu, "decode.precision"); });
    EXPECT_NE(e.find("decode.precision: bf16 needs native bf16 arithmetic"), std::string::npos)
        << e;
    EXPECT_NE(e.find("avx512_bf16 or AMX"), std::string::npos) << e;
    EXPECT_NE(e.find("use fp32 or auto"), std::string::npos) << e;
  }
  if (cpu_is_native()) {
    const auto a = resolve_precision("auto", cpu, "train.precision");
    EXPECT_TRUE(a.bf16());
    EXPECT_NE(a.reason.find(cpu_native_bf16()), std::string::npos) << a.reason;
    EXPECT_TRUE(resolve_precision("bf16", cpu, "train.precision").bf16());
  }
  // CUDA: autocast, whatever this machine has (the device is only described here).
  const auto cuda = resolve_precision("auto", torch::Device(torch::kCUDA), "train.precision");
  EXPECT_TRUE(cuda.bf16());
  EXPECT_NE(cuda.reason.find("CUDA"), std::string::npos);
  EXPECT_NE(error_of([&] {
              resolve_precision("fp16", cpu, "train.precision");
            }).find("train.precision: expected auto, fp32 or bf16, got 'fp16'"),
            std::string::npos);
}

TEST(Precision, ScopeTurnsCpuAutocastOnNestsAndRestores) {
  const torch::Device cpu(torch::kCPU);
  auto x = torch::randn({4, 8});
  auto w = torch::randn({3, 8}, torch::requires_grad());
  // The bf16 product is x and w rounded to bf16, multiplied with fp32 accumulation: the reference,
  // computed in fp32 outside any scope from the rounded inputs.
  const auto want = torch::linear(x.to(torch::kBFloat16).to(torch::kFloat32),
                                  w.detach().to(torch::kBFloat16).to(torch::kFloat32));
  EXPECT_FALSE(cpu_autocast_active());
  {
    PrecisionScope off(false, cpu);
    EXPECT_FALSE(cpu_autocast_active());
    EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat32);
  }
  {
    PrecisionScope on(true, cpu);
    EXPECT_TRUE(cpu_autocast_active());
    EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    {
      PrecisionScope inner(true, cpu);
      EXPECT_TRUE(cpu_autocast_active());
    }
    EXPECT_TRUE(cpu_autocast_active());  // the inner scope leaves the outer one on
    const auto got = torch::linear(x, w);
    EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
    // Within the rounding of the bf16 result (2^-8 relative).
    const auto diff = (got.to(torch::kFloat32) - want).abs();
    EXPECT_TRUE((diff <= want.abs() * (1.0 / 128) + 1e-6).all().item<bool>()) << got << want;
  }
  EXPECT_FALSE(cpu_autocast_active());
  EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat32);
}

constexpr int64_t kVocab = 50;

// small_model_config() with a joint vocabulary of kVocab, seeded, in training mode.
model::Transformer small_transformer() {
  const auto mc = small_model_config();
  torch::manual_seed(1);
  model::Transformer m(mc, model::Architecture::uniform(mc), kVocab, kVocab);
  m->train();
  return m;
}

struct Batch {
  torch::Tensor src, tgt_in, tgt_out;
};

Batch random_batch(int64_t vocab) {
  torch::manual_seed(7);
  Batch b;
  b.src = torch::randint(4, vocab, {3, 7});
  b.tgt_in = torch::randint(4, vocab, {3, 6});
  b.tgt_out = torch::randint(4, vocab, {3, 6});
  b.src[2][6] = 0;  // some padding
  b.tgt_out[1][5] = 0;
  return b;
}

TEST(Precision, Bf16RunsTheProductsAndKeepsSoftmaxNormsGatesAndLossInFp32) {
  const torch::Device cpu(torch::kCPU);
  auto m = small_transformer();
  const std::vector<model::AttentionType> all(std::begin(model::kAttentionTypes),
                                              std::end(model::kAttentionTypes));
  prune::HeadGates gates(m, all, prune::HardConcreteOptions{});
  gates->apply_sample(3);
  for (auto t : all)
    for (auto& l : m->attention_layers(t)) l->set_record(true);
  const auto b = random_batch(kVocab);
  torch::Tensor logits, memory;
  {
    PrecisionScope scope(true, cpu);
    const auto enc = m->encode(b.src);
    memory = enc.memory;
    logits = m->decode(b.tgt_in, enc);
  }
  // bf16: the products (here the output layer's; every linear layer alike).
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  // fp32: the residual stream and its layer norms (the encoder's output is a layer norm's).
  EXPECT_EQ(memory.scalar_type(), torch::kFloat32);
  // fp32: attention weights (softmax) and the heads' outputs after the gates.
  for (auto t : all) {
    for (auto& l : m->attention_layers(t)) {
      EXPECT_EQ(l->last_weights().scalar_type(), torch::kFloat32);
      EXPECT_EQ(l->last_head_outputs().scalar_type(), torch::kFloat32);
    }
  }
  // bf16: attention's two products (the cache of incremental decoding keeps their inputs).
  {
    model::MultiheadAttention att(16, 2, 8, 0.0, true);
    model::KVCache cache;
    PrecisionScope scope(true, cpu);
    const auto out =
        att->forward(torch::randn({2, 1, 16}), torch::Tensor(), torch::Tensor(), &cache);
    EXPECT_EQ(cache.k.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(cache.v.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  }
  // fp32: the gates' penalty and the loss.
  const auto penalty = gates->penalty(PenaltyNorm::kLayerMean);
  EXPECT_EQ(penalty.scalar_type(), torch::kFloat32);
  const auto ls = model::label_smoothed_loss(logits, b.tgt_out, 0.1);
  EXPECT_EQ(ls.loss.scalar_type(), torch::kFloat32);
  (ls.loss + penalty).backward();
  // fp32: every gradient as accumulated (master weights), the gates' too.
  for (const auto& p : m->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_EQ(p.value().scalar_type(), torch::kFloat32) << p.key();
    EXPECT_EQ(p.value().grad().scalar_type(), torch::kFloat32) << p.key();
  }
  for (const auto& p : gates->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);
  }
}

// The loss and the gradients of a small model (two layers each side, every attention type, label
// smoothing, padding) in bf16 against fp32: bf16 keeps 8 bits of mantissa (relative rounding
// 2^-9 = 0.2% per value), so a product of 32-64 terms, accumulated in fp32, is off by ~0.5% and
// the gradients, through a dozen such products, by a few percent. Tolerances: loss 1%, each
// parameter tensor's gradient within 8% of its fp32 norm, all gradients together within 3% and
// pointing the same way (cosine > 0.999).
TEST(Precision, Bf16GradientsAreWithinToleranceOfFp32) {
  const torch::Device cpu(torch::kCPU);
  auto m = small_transformer();  // dropout 0: the same function both times
  const auto b = random_batch(kVocab);
  auto run = [&](bool bf16, std::vector<torch::Tensor>* grads) {
    m->zero_grad();
    torch::Tensor logits;
    {
      PrecisionScope scope(bf16, cpu);
      logits = m->forward(b.src, b.tgt_in);
    }
    const auto ls = model::label_smoothed_loss(logits, b.tgt_out, 0.1);
    (ls.loss / static_cast<double>(ls.tokens)).backward();
    grads->clear();
    for (const auto& p : m->parameters()) grads->push_back(p.grad().clone());
    return ls.loss.item<double>() / static_cast<double>(ls.tokens);
  };
  std::vector<torch::Tensor> g32, g16;
  const double loss32 = run(false, &g32);
  const double loss16 = run(true, &g16);
  EXPECT_NE(loss16, loss32);  // it did run in another precision
  EXPECT_NEAR(loss16, loss32, 0.01 * loss32);
  double diff2 = 0, norm2 = 0, dot = 0, n16 = 0;
  const auto names = m->named_parameters();
  for (size_t i = 0; i < g32.size(); ++i) {
    const double d = (g16[i] - g32[i]).norm().item<double>();
    const double n = g32[i].norm().item<double>();
    if (n > 1e-6) {
      EXPECT_LT(d / n, 0.08) << names[i].key();
    }
    diff2 += d * d;
    norm2 += n * n;
    dot += (g16[i] * g32[i]).sum().item<double>();
    n16 += g16[i].pow(2).sum().item<double>();
  }
  EXPECT_LT(std::sqrt(diff2 / norm2), 0.03);
  EXPECT_GT(dot / std::sqrt(norm2 * n16), 0.999);
}

// An impossible decode.precision stops a training run before its first step, not at its first
// evaluation.
TEST(Precision, ARunRefusesAnImpossibleDecodePrecisionBeforeItsFirstStep) {
  testing::TempDir dir;
  Config c = tiny_run_config(dir, 8);
  c.train.precision = "fp32";
  c.decode.precision = "bf16";
  Bf16Env none("0");
  train::TrainOptions o;
  o.run_dir = dir / "run";
  const std::string e = error_of([&] { train::train_command(c, o); });
  EXPECT_NE(e.find("decode.precision: bf16 needs native bf16 arithmetic"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints" / "last"));
}

TEST(Precision, AutoThreadsFollowThePrecisionAndTheProcessesShare) {
  ThreadsConfig t;
  t.intra_op = -1;
  t.blas = 0;
  EXPECT_EQ(runtime::intra_op_threads(t, false), 1);  // fp32: OpenBLAS has the threads
  EXPECT_EQ(runtime::intra_op_threads(t, true), runtime::num_cores());
  t.blas = 3;  // a sweep worker's share of the cores
  EXPECT_EQ(runtime::intra_op_threads(t, false), 1);
  EXPECT_EQ(runtime::intra_op_threads(t, true), 3);
  t.intra_op = 0;
  EXPECT_EQ(runtime::intra_op_threads(t, true), runtime::num_cores());
  t.intra_op = 5;  // given: kept whatever the precision
  EXPECT_EQ(runtime::intra_op_threads(t, false), 5);
  EXPECT_EQ(runtime::intra_op_threads(t, true), 5);
}

TEST(Runtime, OpenBlasFallbackKernelsAreReplacedOnlyWhereTheCpuHasBetter) {
  const runtime::CpuVectorFeatures skx{.avx2_fma = true, .avx512_skx = true};
  const runtime::CpuVectorFeatures hsw{.avx2_fma = true, .avx512_skx = false};
  const runtime::CpuVectorFeatures sse{};
  // A CPU OpenBLAS does not recognise gets its generic pre-AVX2 set (any case in its name).
  EXPECT_EQ(runtime::better_openblas_coretype("Prescott", skx), "SkylakeX");
  EXPECT_EQ(runtime::better_openblas_coretype("PRESCOTT", hsw), "Haswell");
  EXPECT_EQ(runtime::better_openblas_coretype("Nehalem", hsw), "Haswell");
  EXPECT_EQ(runtime::better_openblas_coretype("Sandybridge", skx), "SkylakeX");
  // A CPU without AVX2 really is served by the pre-AVX2 sets.
  EXPECT_EQ(runtime::better_openblas_coretype("Prescott", sse), "");
  // OpenBLAS's own AVX2 / AVX-512 choices (a recognised CPU) are kept, as is a non-OpenBLAS BLAS.
  for (const char* k : {"Haswell", "SkylakeX", "Zen", "CooperLake", "SapphireRapids", "Excavator"})
    EXPECT_EQ(runtime::better_openblas_coretype(k, skx), "") << k;
  EXPECT_EQ(runtime::better_openblas_coretype("", skx), "");
}

TEST(Precision, ConfigKeysAndTheReplacedBf16Key) {
  ConfigLoader l;
  l.apply_yaml_text("train:\n  precision: bf16\ndecode:\n  precision: fp32\n", "p.yaml");
  Config c = l.finish();
  EXPECT_EQ(c.train.precision, "bf16");
  EXPECT_EQ(c.decode.precision, "fp32");
  EXPECT_EQ(Config().train.precision, "auto");
  EXPECT_EQ(Config().decode.precision, "auto");
  const std::string e =
      error_of([] { ConfigLoader().apply_yaml_text("train:\n  precision: half\n", "bad.yaml"); });
  EXPECT_NE(e.find("bad.yaml:2: train.precision: expected one of auto, fp32, bf16, got 'half'"),
            std::string::npos)
      << e;
  // The config.yaml of older runs says train.bf16: it still loads, with its old meaning.
  ConfigLoader old;
  old.apply_yaml_text("train:\n  bf16: false\n", "old.yaml");
  EXPECT_EQ(old.finish().train.precision, "fp32");
  EXPECT_EQ(old.origin("train.precision"), "old.yaml:2 (as train.bf16)");
  ConfigLoader old_on;
  old_on.apply_set("train.bf16=true");
  EXPECT_EQ(old_on.finish().train.precision, "bf16");
  EXPECT_NE(error_of([] { ConfigLoader().apply_set("train.bf16=maybe"); }).find("train.bf16"),
            std::string::npos);
  // The dump names the new key only.
  EXPECT_EQ(dump_config(c).find("bf16:"), std::string::npos);
  EXPECT_NE(dump_config(c).find("precision: bf16"), std::string::npos);
}

}  // namespace
}  // namespace headcount
