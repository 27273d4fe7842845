// Label-smoothed cross-entropy (Szegedy et al. 2016; fairseq's label_smoothed_cross_entropy):
// loss = (1 - eps) * nll + eps * mean over the vocabulary of -log p, summed over non-padding
// target tokens.
#pragma once

#include <torch/types.h>

namespace headcount::model {

struct LossSums {
  torch::Tensor loss;  // scalar, summed over tokens (the training objective)
  torch::Tensor nll;   // scalar, summed negative log-likelihood (no smoothing)
  int64_t tokens = 0;  // non-padding target tokens
};

// logits [B, T, V]; target [B, T] with padding = data::kPadId. The loss and its gradient are
// computed in fp32 whatever the logits' dtype; the gradient comes back in the logits' dtype.
// bf16 (or fp16) logits are processed in blocks of rows (`rows_per_block`; 0:
// default_loss_block_rows), so that on the CPU no fp32 copy of the whole [B*T, V] logits is made.
LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t rows_per_block = 0);

// The rows per block of low-precision logits [rows, vocab] on `device`: on the CPU about 2 MB of
// fp32 a block (cache-sized temporaries); elsewhere (a GPU) all rows in one block, since each
// block costs about 20 kernel launches (4,000 a step at 8,192 tokens and blocks of 65 rows: the
// launch-bound bf16 step measured 0.55x PyTorch on an H100) and GPU memory holds the fp32 copy.
int64_t default_loss_block_rows(const torch::Device& device, int64_t rows, int64_t vocab);

// Knowledge distillation (Hinton et al. 2015): T^2 x KL(softmax(teacher / T) || softmax(student /
// T)), summed over the positions whose target is not padding; computed in fp32 whatever the
// logits' dtype (the gradient flows to `student` only). student, teacher [B, T, V]; target [B, T].
torch::Tensor distillation_loss(const torch::Tensor& student, const torch::Tensor& teacher,
                                const torch::Tensor& target, double temperature);

}  // namespace headcount::model
