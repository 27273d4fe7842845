#include "headcount/train/loss.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include "headcount/data/vocab.h"

namespace headcount::train {
namespace {

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
    const int64_t V = lprobs.size(1);
    auto zero = torch::zeros({}, lprobs.options());
    const auto g_loss = grads[0].defined() ? grads[0].to(torch::kFloat32) : zero;
    const auto g_nll = grads[1].defined() ? grads[1].to(torch::kFloat32) : zero;
    auto grad = lprobs.exp().mul_(((g_loss + g_nll) * weight).unsqueeze(1));
    grad.sub_((g_loss * (eps / static_cast<double>(V)) * weight).unsqueeze(1));
    grad.scatter_add_(1, index, (-(g_loss * (1.0 - eps) + g_nll) * weight).unsqueeze(1));
    return {grad.to(dtype), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon) {
  const int64_t V = logits.size(-1);
  const auto out =
      SmoothedCrossEntropyFn::apply(logits.reshape({-1, V}), target.reshape({-1}), epsilon);
  LossSums sums;
  sums.loss = out[0];
  sums.nll = out[1];
  sums.tokens = target.ne(data::kPadId).sum().item<int64_t>();
  return sums;
}

}  // namespace headcount::train
