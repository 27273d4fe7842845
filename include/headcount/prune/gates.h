// Hard-Concrete gates (Louizos et al. 2018), one per attention head, as Voita et al. (2019) use
// them to prune heads. Depends on nothing but tensors, so it is tested alone.
//
// With temperature beta, stretch limits (l, r) and eps (Louizos et al. 2018, "hard concrete"):
//   training sample   u ~ U(eps, 1 - eps), s = sigmoid((log u - log(1 - u) + log_alpha) / beta),
//                     g = clamp(s (r - l) + l, 0, 1)
//   P(gate != 0)      P_open = sigmoid(log_alpha - beta log(-l / r))   (the relaxed L0 norm)
//   eval gate         g = clamp(sigmoid(log_alpha) (r - l) + l, 0, 1): exactly 0 for
//                     log_alpha <= log(-l / r), exactly 1 for log_alpha >= log((1 - l) / (r - 1))
// A head is pruned when its eval gate is 0.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <string>

#include "headcount/common/choices.h"

namespace headcount::prune {

struct HardConcreteOptions {
  // Temperature: Voita et al.'s code uses 0.33; Louizos et al. and CoFi 2/3.
  double temperature = 0.33;
  double stretch_low = -0.1;  // l
  double stretch_high = 1.1;  // r
  double eps = 1e-6;
  // Initial log_alpha. 3.0 >= log(11) opens every eval gate fully, so the gated model computes
  // exactly what the converged model did at step 0 (Voita's code starts near 0 instead, which
  // halves every head at once; CoFi starts at 10).
  double init_log_alpha = 3.0;
  // kHead: one draw per head per optimizer step, shared by its examples and by every batch of the
  // step (train.update_freq, several processes) as METHODS.md says; kExample: one draw per head
  // per example.
  GateNoise noise = GateNoise::kHead;
};

class HardConcreteGateImpl : public torch::nn::Module {
 public:
  HardConcreteGateImpl(int64_t num_heads, HardConcreteOptions options = {});

  // Training: a sample, [H] (noise kHead) or [batch, H] (noise kExample). Eval: the
  // deterministic gate [H].
  torch::Tensor forward(int64_t batch);
  torch::Tensor sample(int64_t batch);
  // The two halves of sample(): the uniform noise u (no gradient; [H], or [batch, H] with noise
  // kExample), and the gate it gives with the current log_alpha (differentiable in log_alpha).
  torch::Tensor draw_noise(int64_t batch) const;
  torch::Tensor sample_with(const torch::Tensor& u) const;
  torch::Tensor eval_gate() const;
  torch::Tensor p_open() const;
  // E[g] of the training gate, [H] (no gradient): the integral over t in [0, 1] of
  // P(g > t) = sigmoid(log_alpha - beta logit((t - l) / (r - l))), by Simpson's rule (2,000
  // intervals; the integrand is smooth: (t - l) / (r - l) stays inside (0, 1)).
  torch::Tensor expected_gate() const;
  // Sum over heads of P_open (differentiable in log_alpha).
  torch::Tensor penalty() const;
  int64_t num_heads() const { return log_alpha.size(0); }
  const HardConcreteOptions& options() const { return options_; }
  // log_alpha at and below which the eval gate is exactly 0, and at and above which it is 1.
  double closed_threshold() const;
  double open_threshold() const;

  torch::Tensor log_alpha;  // [H]

 private:
  HardConcreteOptions options_;
};
TORCH_MODULE(HardConcreteGate);

}  // namespace headcount::prune
