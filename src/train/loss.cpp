#include "headcount/train/loss.h"

#include <torch/torch.h>

#include "headcount/data/vocab.h"

namespace headcount::train {

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon) {
  const int64_t V = logits.size(-1);
  auto lprobs = torch::log_softmax(logits.reshape({-1, V}).to(torch::kFloat32), -1);  // [N, V]
  auto flat = target.reshape({-1});                                                   // [N]
  auto keep = flat.ne(data::kPadId);
  auto nll = -lprobs.gather(1, flat.unsqueeze(1)).squeeze(1);  // [N]
  auto smooth = -lprobs.mean(1);                               // [N]
  auto zero = torch::zeros_like(nll);
  nll = torch::where(keep, nll, zero);
  smooth = torch::where(keep, smooth, zero);
  LossSums out;
  out.nll = nll.sum();
  out.loss = (1.0 - epsilon) * out.nll + epsilon * smooth.sum();
  out.tokens = keep.sum().item<int64_t>();
  return out;
}

}  // namespace headcount::train
