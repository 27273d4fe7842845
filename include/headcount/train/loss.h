// Label-smoothed cross-entropy (Szegedy et al. 2016; fairseq's label_smoothed_cross_entropy):
// loss = (1 - eps) * nll + eps * mean over the vocabulary of -log p, summed over non-padding
// target tokens.
#pragma once

#include <torch/types.h>

namespace headcount::train {

struct LossSums {
  torch::Tensor loss;  // scalar, summed over tokens (the training objective)
  torch::Tensor nll;   // scalar, summed negative log-likelihood (no smoothing)
  int64_t tokens = 0;  // non-padding target tokens
};

// logits [B, T, V]; target [B, T] with padding = data::kPadId.
LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon);

}  // namespace headcount::train
