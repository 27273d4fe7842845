// Clocks and peaks the benchmarks measure against: wall time of a device's queued work, the
// matmul peak of a device, page faults, the BLAS's thread count.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <utility>

namespace headcount::bench {

// Waits for the work queued on `device`: CUDA runs asynchronously, so a clock read without it
// times the launches, not the arithmetic.
void wait_for(const torch::Device& device);

// The device tensors sent to `device` land on ("cuda" names the current GPU: cuda:0).
torch::Device concrete(const torch::Device& device);

// Seconds that f() takes on `device`, its queued GPU work included.
template <typename F>
double timed_on(const torch::Device& device, F&& f) {
  wait_for(device);
  const auto t0 = std::chrono::steady_clock::now();
  std::forward<F>(f)();
  wait_for(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The edge of the square products that measure a device's matmul peak: 2048 keeps the CPU's at
// ~0.1 s; a GPU finishes that in microseconds, launch-bound, so it gets 8192 (1.1 TFLOP, ~1-25 ms
// on an H100, 0.8 GB in fp32).
int64_t peak_matmul_size(const torch::Device& device);

// The best of three n x n products in fp32 (CPU: OpenBLAS; CUDA: cuBLAS, TF32 as the global
// setting allows it) or bf16 (CPU: oneDNN; CUDA: cuBLAS), on the threads set now.
double matmul_peak_gflops(bool bf16 = false, const torch::Device& device = torch::kCPU);

// Page faults so far: first touching a page costs ~12 us on some virtual machines, more than the
// arithmetic on it (see runtime::keep_freed_memory).
double minor_faults();

// The bench flags' model shape, checked as the config checks model.d_model and model.heads.
void check_shape(int d_model, int heads);

}  // namespace headcount::bench
