// `bench train`: the training-step speed of headcount's Transformer (tokens/s, FLOPs, share of
// the matmul peak measured now), optionally against gated (L0) fine-tuning steps.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/common/precision.h"

namespace headcount::bench {

struct TrainBenchOptions {
  int d_model = 256, layers = 6, heads = 8, ffn = 1024, vocab = 8000;
  int sentences = 64, length = 32;  // 2048 target tokens a step
  int steps = 5, warmup = 2;
  bool gated = false;     // also time gated fine-tuning steps, alternating with plain ones
  std::string profile;    // write a Chrome trace of one step here
  std::string precision;  // overrides train.precision when set
};

// FLOPs of one training step: 3x the forward matmuls (forward, and backward's two products).
double train_step_flops(const TrainBenchOptions& o);

struct TrainBenchResult {
  torch::Device device{torch::kCPU};
  PrecisionChoice precision;
  std::vector<double> times;        // plain steps, seconds, sorted
  std::vector<double> gated_times;  // gated steps (with --gated), seconds, sorted
  double faults_per_step = 0;       // plain and gated steps together
  double tokens_per_step = 0;
  double flops_per_step = 0;
  double matmul_peak_gflops = 0;  // measured after the steps, on the device, in its precision
  int64_t matmul_peak_size = 0;
  // fp32 products on CUDA run in TF32 where the global setting allows it (LibTorch's default:
  // not), which changes the peak they reach.
  bool tf32 = false;
  int intra_op_threads = 0;

  double median() const { return times[times.size() / 2]; }
  double gated_median() const { return gated_times[gated_times.size() / 2]; }
  double achieved_gflops() const { return flops_per_step / median() / 1e9; }
};

// Trains on random batches on the device the trainer would take (`device`: one that cannot be
// used is resolve_device's error, never a silent fallback to the CPU), timing `steps` steps after
// `warmup`; then measures the matmul peak.
TrainBenchResult bench_train(const TrainBenchOptions& o, const Config& config);

}  // namespace headcount::bench
