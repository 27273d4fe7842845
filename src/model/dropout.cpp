#include "headcount/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>

namespace headcount::model {
namespace {

uint64_t draw_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (p >= 1.0) return x * 0.0;
  if (!x.device().is_cpu()) return torch::dropout(x, p, true);
  const int64_t n = x.numel();
  // An element is kept when its 16-bit draw is below this.
  const uint32_t threshold = static_cast<uint32_t>(std::lround((1.0 - p) * 65536.0));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  auto mask = torch::empty(x.sizes(), x.options().dtype(torch::kFloat32).requires_grad(false));
  float* m = mask.data_ptr<float>();
  uint64_t state = draw_seed();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint64_t r = splitmix64(state);
    m[i] = (r & 0xffff) < threshold ? scale : 0.0f;
    m[i + 1] = ((r >> 16) & 0xffff) < threshold ? scale : 0.0f;
    m[i + 2] = ((r >> 32) & 0xffff) < threshold ? scale : 0.0f;
    m[i + 3] = (r >> 48) < threshold ? scale : 0.0f;
  }
  if (i < n) {
    uint64_t r = splitmix64(state);
    for (; i < n; ++i, r >>= 16) m[i] = (r & 0xffff) < threshold ? scale : 0.0f;
  }
  // A bf16 (or fp16) input is multiplied by the fp32 mask and comes out in fp32: 1 / (1 - p)
  // rounded to bf16 would bias every kept element (1.109375 for p = 0.1, 0.16% low). Its outputs
  // go into the fp32 residual stream (or the next product, which autocast casts back).
  return x * mask;
}

}  // namespace headcount::model
