#include "headcount/bench/train.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "headcount/bench/timing.h"
#include "headcount/common/check.h"
#include "headcount/common/runtime.h"
#include "headcount/data/batching.h"
#include "headcount/model/loss.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/head_gates.h"
#include "headcount/prune/prune_trainer.h"

namespace headcount::bench {

double train_step_flops(const TrainBenchOptions& a) {
  const double B = a.sentences, L = a.length, D = a.d_model, F = a.ffn, V = a.vocab, N = a.layers;
  const double tokens = B * L;
  // Per layer and token: attention projections 4 D^2, feed-forward 2 D F (multiply-adds).
  const double enc = N * tokens * (4 * D * D + 2 * D * F) + N * B * 2 * L * L * D;
  const double dec = N * tokens * (8 * D * D + 2 * D * F) + N * B * 4 * L * L * D;
  const double out = tokens * D * V;
  return 3.0 * 2.0 * (enc + dec + out);
}

namespace {

// The bench's Transformer at its shapes, with the dropouts of PyTorch's nn.Transformer (the peer):
// sublayer, attention and activation.
model::Transformer bench_model(const TrainBenchOptions& a, const torch::Device& device) {
  ModelConfig mc;
  mc.d_model = a.d_model;
  mc.ffn_dim = a.ffn;
  mc.encoder_layers = mc.decoder_layers = a.layers;
  mc.heads = a.heads;
  mc.dropout = 0.1;
  mc.attention_dropout = 0.1;
  mc.activation_dropout = 0.1;
  model::Transformer m(mc, model::Architecture::uniform(mc), a.vocab, a.vocab);
  m->to(device);
  m->train();
  return m;
}

torch::optim::AdamOptions bench_adam_options() {
  return torch::optim::AdamOptions(1e-4).betas({0.9, 0.98}).eps(1e-9);
}

// The model, its optimizer and a random batch; the plain and (with --gated) the gated step.
class TrainBench {
 public:
  TrainBench(const TrainBenchOptions& a, const Config& config, const torch::Device& device,
             const PrecisionChoice& precision)
      : device_(device),
        precision_(precision),
        model_(bench_model(a, device)),
        adam_(model_->parameters(), bench_adam_options()),
        // Drawn on the CPU, so that every device trains on the same batch.
        src_(torch::randint(4, a.vocab, {a.sentences, a.length}).to(device)),
        tgt_in_(torch::randint(4, a.vocab, {a.sentences, a.length}).to(device)),
        tgt_out_(torch::randint(4, a.vocab, {a.sentences, a.length}).to(device)) {
    batch_.ids.resize(static_cast<size_t>(a.sentences));
    if (a.gated) add_gates(config);
  }

  void step() {
    for (auto& p : frozen_) p.set_requires_grad(true);
    adam_.zero_grad();
    auto ls = model::label_smoothed_loss(forward(), tgt_out_, 0.1);
    (ls.loss / static_cast<double>(ls.tokens)).backward();
    adam_.step();
  }

  void gated_step() {
    for (auto& p : frozen_) p.set_requires_grad(false);
    gated_adam_->zero_grad();
    l0_->begin_step();
    l0_->before_forward(batch_);
    auto ls = model::label_smoothed_loss(forward(), tgt_out_, 0.1);
    const auto r = l0_->regulariser(gated_steps_);
    auto objective = ls.loss / static_cast<double>(ls.tokens);
    if (r.term.defined()) objective = objective + r.term;
    objective.backward();
    gated_adam_->step();
    l0_->after_step(gated_steps_++, r);
    // The plain steps in between run without gates.
    l0_->gates()->clear();
  }

 private:
  // The forward pass under train.precision, as the trainer runs it (loss and backward outside).
  torch::Tensor forward() {
    PrecisionScope scope(precision_, device_);
    return model_->forward(src_, tgt_in_);
  }

  // Gated fine-tuning: the library's L0 pruning (prune::L0Pruning) with the config's prune
  // section (by default gates on every head, lambda 0.05 x L_C), its parameter groups in one Adam
  // as the trainer builds it, a fresh gate sample each step. Parameters prune.train_parts freezes
  // in the gated steps (none by default) train in the plain ones.
  void add_gates(const Config& config) {
    l0_ = std::make_unique<prune::L0Pruning>(config, train::TrainOptions{});
    groups_ = l0_->parameter_groups(model_, device_);
    for (auto& p : model_->parameters()) {
      if (!p.requires_grad()) frozen_.push_back(p);
    }
    gated_adam_ = train::make_adam(groups_, bench_adam_options());
    train::set_group_rates(*gated_adam_, groups_, 1e-4);
  }

  torch::Device device_;
  PrecisionChoice precision_;
  model::Transformer model_;
  torch::optim::Adam adam_;
  torch::Tensor src_, tgt_in_, tgt_out_;
  std::vector<torch::Tensor> frozen_;
  std::unique_ptr<prune::L0Pruning> l0_;
  std::vector<train::ParamGroup> groups_;
  std::unique_ptr<torch::optim::Adam> gated_adam_;
  data::Batch batch_;
  int64_t gated_steps_ = 0;
};

// One step under LibTorch's profiler, its trace written to `file` through a temporary and a
// rename (the profiler itself only prints when it cannot write, and carries on).
void profiled_step(const std::string& file, TrainBench& bench) {
  const fs::path target = file;
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  HC_CHECK(fs::is_directory(dir, ec), "--profile {}: the folder {} does not exist", file,
           dir.string());
  HC_CHECK(!fs::exists(target, ec) || fs::is_regular_file(target, ec),
           "--profile {}: exists and is not a regular file; expected a file name", file);
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}", target.filename().string(), getpid());
  {
    torch::autograd::profiler::RecordProfile guard(tmp.string());
    bench.step();
  }
  const bool written = fs::is_regular_file(tmp, ec) && fs::file_size(tmp, ec) > 0 && !ec;
  if (written) fs::rename(tmp, target, ec);
  if (!written || ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    HC_FAIL("--profile {}: the profile could not be written{}", file,
            ec ? ": " + ec.message() : "");
  }
}

// Warm-up (and the profiled step), then the timed steps, plain and gated alternately.
void run_steps(const TrainBenchOptions& a, TrainBench& bench, TrainBenchResult& r) {
  for (int i = 0; i < a.warmup; ++i) bench.step();
  if (a.gated) bench.gated_step();
  if (!a.profile.empty()) profiled_step(a.profile, bench);
  const double faults_before = minor_faults();
  for (int i = 0; i < a.steps; ++i) {
    r.times.push_back(timed_on(r.device, [&] { bench.step(); }));
    if (a.gated) r.gated_times.push_back(timed_on(r.device, [&] { bench.gated_step(); }));
  }
  r.faults_per_step = (minor_faults() - faults_before) / a.steps;
  std::sort(r.times.begin(), r.times.end());
  std::sort(r.gated_times.begin(), r.gated_times.end());
}

}  // namespace

TrainBenchResult bench_train(const TrainBenchOptions& a, const Config& config) {
  check_shape(a.d_model, a.heads);
  TrainBenchResult r;
  r.device = concrete(runtime::resolve_device(config.device));
  r.precision = resolve_precision(a.precision.empty() ? config.train.precision : a.precision,
                                  r.device, "train.precision");
  runtime::apply_threads(config.threads, r.precision.bf16());
  torch::manual_seed(1);
  TrainBench bench(a, config, r.device, r.precision);
  run_steps(a, bench, r);
  r.tokens_per_step = static_cast<double>(a.sentences) * a.length;
  r.flops_per_step = train_step_flops(a);
  r.matmul_peak_gflops = matmul_peak_gflops(r.precision.bf16(), r.device);
  r.matmul_peak_size = peak_matmul_size(r.device);
  r.tf32 = r.device.is_cuda() && !r.precision.bf16() && at::globalContext().allowTF32CuBLAS();
  r.intra_op_threads = at::get_num_threads();
  return r;
}

}  // namespace headcount::bench
