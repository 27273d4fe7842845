#include "headcount/bench/timing.h"

#include <sys/resource.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>

#include "headcount/common/check.h"

namespace headcount::bench {

void wait_for(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

torch::Device concrete(const torch::Device& device) {
  return torch::empty({0}, torch::TensorOptions().device(device)).device();
}

int64_t peak_matmul_size(const torch::Device& device) {
  return device.is_cuda() ? 8192 : 2048;
}

double matmul_peak_gflops(bool bf16, const torch::Device& device) {
  torch::NoGradGuard g;
  const int64_t n = peak_matmul_size(device);
  const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat32;
  auto a = torch::randn({n, n}).to(device, dtype), b = torch::randn({n, n}).to(device, dtype);
  auto c = torch::mm(a, b);  // warm-up: cuBLAS handles and workspaces, oneDNN's kernels
  double best = 1e30;
  for (int i = 0; i < 3; ++i) best = std::min(best, timed_on(device, [&] { c = torch::mm(a, b); }));
  return 2.0 * static_cast<double>(n) * n * n / best / 1e9;
}

double minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
}

void check_shape(int d_model, int heads) {
  HC_CHECK(d_model % heads == 0,
           "--d-model ({}) is not divisible by --heads ({}): every head takes d_model / heads "
           "dimensions",
           d_model, heads);
}

}  // namespace headcount::bench
