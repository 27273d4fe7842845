#include "headcount/prune/gates.h"

#include <torch/torch.h>

#include <cmath>

#include "headcount/common/check.h"

namespace headcount::prune {

HardConcreteGateImpl::HardConcreteGateImpl(int64_t num_heads, HardConcreteOptions options)
    : options_(std::move(options)) {
  HC_CHECK(num_heads >= 0, "a gate needs a non-negative number of heads, got {}", num_heads);
  HC_CHECK(options_.stretch_low < 0 && options_.stretch_high > 1,
           "hard-concrete stretch limits must satisfy l < 0 < 1 < r, got ({}, {})",
           options_.stretch_low, options_.stretch_high);
  HC_CHECK(options_.temperature > 0, "hard-concrete temperature must be positive, got {}",
           options_.temperature);
  // device: cpu (a parameter, moved with its module: HeadGatesImpl puts it on the layer's device)
  log_alpha = register_parameter("log_alpha", torch::full({num_heads}, options_.init_log_alpha));
}

double HardConcreteGateImpl::closed_threshold() const {
  return std::log(-options_.stretch_low / options_.stretch_high);
}

double HardConcreteGateImpl::open_threshold() const {
  return std::log((1.0 - options_.stretch_low) / (options_.stretch_high - 1.0));
}

torch::Tensor HardConcreteGateImpl::sample(int64_t batch) {
  return sample_with(draw_noise(batch));
}

torch::Tensor HardConcreteGateImpl::draw_noise(int64_t batch) const {
  const double eps = options_.eps;
  const bool per_example = options_.noise == GateNoise::kExample;
  std::vector<int64_t> shape =
      per_example ? std::vector<int64_t>{batch, num_heads()} : std::vector<int64_t>{num_heads()};
  return torch::rand(shape, log_alpha.options().requires_grad(false)) * (1 - 2 * eps) + eps;
}

torch::Tensor HardConcreteGateImpl::sample_with(const torch::Tensor& u) const {
  const double l = options_.stretch_low, r = options_.stretch_high;
  auto s = torch::sigmoid((torch::log(u) - torch::log(1 - u) + log_alpha) / options_.temperature);
  return torch::clamp(s * (r - l) + l, 0.0, 1.0);
}

torch::Tensor HardConcreteGateImpl::eval_gate() const {
  const double l = options_.stretch_low, r = options_.stretch_high;
  auto g = torch::clamp(torch::sigmoid(log_alpha) * (r - l) + l, 0.0, 1.0);
  // Exact 0 and 1 beyond the thresholds, whatever the rounding of the formula there.
  g = torch::where(log_alpha <= closed_threshold(), torch::zeros_like(g), g);
  g = torch::where(log_alpha >= open_threshold(), torch::ones_like(g), g);
  return g;
}

torch::Tensor HardConcreteGateImpl::p_open() const {
  const double shift =
      options_.temperature * std::log(-options_.stretch_low / options_.stretch_high);
  return torch::sigmoid(log_alpha - shift);
}

torch::Tensor HardConcreteGateImpl::expected_gate() const {
  torch::NoGradGuard no_grad;
  const double l = options_.stretch_low, r = options_.stretch_high, beta = options_.temperature;
  const int64_t n = 2000;  // even
  // The quadrature runs in double on the host (log_alpha is copied there below), so the expected
  // gate is the same number whatever the model's device; the result goes back to that device.
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const auto t = torch::linspace(0.0, 1.0, n + 1, opts);  // device: cpu (host quadrature)
  const auto x = (t - l) / (r - l);
  const auto logit_x = torch::log(x) - torch::log1p(-x);                                // [n+1]
  const auto la = log_alpha.detach().to(torch::kCPU).to(torch::kFloat64).unsqueeze(1);  // [H, 1]
  const auto f = torch::sigmoid(la - beta * logit_x.unsqueeze(0));                      // [H, n+1]
  auto w = torch::ones({n + 1}, opts);  // device: cpu (host quadrature)
  w.slice(0, 1, n, 2).fill_(4.0);
  w.slice(0, 2, n - 1, 2).fill_(2.0);
  const auto e = (f * w).sum(1) / (3.0 * static_cast<double>(n));
  return e.to(log_alpha.scalar_type()).to(log_alpha.device());
}

torch::Tensor HardConcreteGateImpl::penalty() const {
  return p_open().sum();
}

torch::Tensor HardConcreteGateImpl::forward(int64_t batch) {
  return is_training() ? sample(batch) : eval_gate();
}

}  // namespace headcount::prune
