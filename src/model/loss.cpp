#include "headcount/model/loss.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include "headcount/data/vocab.h"

namespace headcount::model {
namespace {

// Per-row factors of the loss's closed-form gradient, from the upstream gradients of (loss, nll):
// d/dlogits = a * p - b, plus c at the target (see SmoothedCrossEntropyFn).
struct GradFactors {
  torch::Tensor a, b, c;  // [N] each
};

GradFactors grad_factors(const torch::autograd::variable_list& grads, const torch::Tensor& weight,
                         double eps, int64_t V) {
  const auto zero = torch::zeros({}, weight.options());
  const auto g_loss = grads[0].defined() ? grads[0].to(torch::kFloat32) : zero;
  const auto g_nll = grads[1].defined() ? grads[1].to(torch::kFloat32) : zero;
  return {(g_loss + g_nll) * weight, g_loss * (eps / static_cast<double>(V)) * weight,
          -(g_loss * (1.0 - eps) + g_nll) * weight};
}

// The loss and its negative log-likelihood part in one autograd node. Its backward is the
// closed form d/dlogits = w * [(g_loss + g_nll) * p - (g_loss * (1 - eps) + g_nll) * onehot -
// g_loss * eps / V] (p = softmax, w = 1 on non-padding tokens): three element-wise passes over
// [N, V] and a scatter of N values, where autograd through the composite graph (gather, mean,
// where, log_softmax) zero-filled and scattered a full [N, V] tensor and added several more.
struct SmoothedCrossEntropyFn : torch::autograd::Function<SmoothedCrossEntropyFn> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& logits,
                                                const torch::Tensor& target, double epsilon) {
    const int64_t V = logits.size(1);
    auto lprobs = torch::log_softmax(logits.to(torch::kFloat32), -1);  // [N, V]
    auto weight = target.ne(data::kPadId).to(torch::kFloat32);         // [N]
    auto index = target.unsqueeze(1);                                  // [N, 1]
    auto nll = -(lprobs.gather(1, index).squeeze(1) * weight).sum();
    auto smooth = -(lprobs.sum(1) * weight).sum() / static_cast<double>(V);
    auto loss = (1.0 - epsilon) * nll + epsilon * smooth;
    ctx->save_for_backward({lprobs, index, weight});
    ctx->saved_data["epsilon"] = epsilon;
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return {loss, nll};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& lprobs = saved[0];
    const auto& index = saved[1];
    const auto& weight = saved[2];
    const double eps = ctx->saved_data["epsilon"].toDouble();
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const auto f = grad_factors(grads, weight, eps, lprobs.size(1));
    auto grad = lprobs.exp().mul_(f.a.unsqueeze(1));
    grad.sub_(f.b.unsqueeze(1));
    grad.scatter_add_(1, index, f.c.unsqueeze(1));
    return {grad.to(dtype), torch::Tensor(), torch::Tensor()};
  }
};

// The same loss for low-precision (bf16) logits, a block of rows at a time: each block is
// converted to fp32, its log-sum-exp kept ([N] floats), and the backward recomputes the block's
// probabilities from the saved low-precision logits. Whole-matrix fp32 temporaries (the fp32
// copy, the log-probabilities, their exponential: 3 x 64 MB for 2,048 tokens and 8,000 pieces)
// become cache-sized ones, reused block after block. With lse = log sum_j exp(x_j):
// nll = lse - x_target, smooth = (V * lse - sum_j x_j) / V, p_j = exp(x_j - lse).
struct BlockedSmoothedCrossEntropyFn : torch::autograd::Function<BlockedSmoothedCrossEntropyFn> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& logits,
                                                const torch::Tensor& target, double epsilon,
                                                int64_t rows_per_block) {
    const int64_t N = logits.size(0), V = logits.size(1);
    auto weight = target.ne(data::kPadId).to(torch::kFloat32);  // [N]
    auto index = target.unsqueeze(1);                           // [N, 1]
    auto lse = torch::empty({N}, logits.options().dtype(torch::kFloat32));
    auto nll = torch::zeros({}, lse.options());
    auto smooth = torch::zeros({}, lse.options());
    for (int64_t r = 0; r < N; r += rows_per_block) {
      const int64_t n = std::min(rows_per_block, N - r);
      const auto x = logits.narrow(0, r, n).to(torch::kFloat32);  // [n, V]
      const auto l = torch::logsumexp(x, 1);                      // [n]
      lse.narrow(0, r, n).copy_(l);
      const auto w = weight.narrow(0, r, n);
      nll.add_(((l - x.gather(1, index.narrow(0, r, n)).squeeze(1)) * w).sum());
      smooth.add_(((l * static_cast<double>(V) - x.sum(1)) * w).sum());
    }
    smooth.div_(static_cast<double>(V));
    auto loss = (1.0 - epsilon) * nll + epsilon * smooth;
    ctx->save_for_backward({logits, index, weight, lse});
    ctx->saved_data["epsilon"] = epsilon;
    ctx->saved_data["rows"] = rows_per_block;
    return {loss, nll};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& logits = saved[0];
    const auto& index = saved[1];
    const auto& weight = saved[2];
    const auto& lse = saved[3];
    const double eps = ctx->saved_data["epsilon"].toDouble();
    const int64_t rows = ctx->saved_data["rows"].toInt();
    const int64_t N = logits.size(0);
    const auto f = grad_factors(grads, weight, eps, logits.size(1));
    auto grad = torch::empty_like(logits);
    for (int64_t r = 0; r < N; r += rows) {
      const int64_t n = std::min(rows, N - r);
      auto g = logits.narrow(0, r, n).to(torch::kFloat32);
      g.sub_(lse.narrow(0, r, n).unsqueeze(1)).exp_();
      g.mul_(f.a.narrow(0, r, n).unsqueeze(1)).sub_(f.b.narrow(0, r, n).unsqueeze(1));
      g.scatter_add_(1, index.narrow(0, r, n), f.c.narrow(0, r, n).unsqueeze(1));
      grad.narrow(0, r, n).copy_(g);
    }
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int64_t default_loss_block_rows(const torch::Device& device, int64_t rows, int64_t vocab) {
  if (!device.is_cpu()) return std::max<int64_t>(1, rows);
  return std::max<int64_t>(1, (int64_t{1} << 19) / std::max<int64_t>(1, vocab));
}

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t rows_per_block) {
  const int64_t V = logits.size(-1);
  const bool low_precision =
      logits.scalar_type() == torch::kBFloat16 || logits.scalar_type() == torch::kHalf;
  if (rows_per_block <= 0)
    rows_per_block = default_loss_block_rows(logits.device(), logits.numel() / V, V);
  const auto out =
      low_precision
          ? BlockedSmoothedCrossEntropyFn::apply(logits.reshape({-1, V}), target.reshape({-1}),
                                                 epsilon, rows_per_block)
          : SmoothedCrossEntropyFn::apply(logits.reshape({-1, V}), target.reshape({-1}), epsilon);
  LossSums sums;
  sums.loss = out[0];
  sums.nll = out[1];
  sums.tokens = target.ne(data::kPadId).sum().item<int64_t>();
  return sums;
}

torch::Tensor distillation_loss(const torch::Tensor& student, const torch::Tensor& teacher,
                                const torch::Tensor& target, double temperature) {
  const int64_t V = student.size(-1);
  const auto keep = target.reshape({-1}).ne(data::kPadId);
  const auto s = student.reshape({-1, V}).index({keep}).to(torch::kFloat32) / temperature;
  const auto t = teacher.detach().reshape({-1, V}).index({keep}).to(torch::kFloat32) / temperature;
  const auto log_pt = torch::log_softmax(t, -1);
  const auto kl = (log_pt.exp() * (log_pt - torch::log_softmax(s, -1))).sum();
  return kl * (temperature * temperature);
}

}  // namespace headcount::model
