// Dropout with a fast mask. LibTorch's CPU dropout draws its mask with bernoulli_, one generator
// call per element: 17% of a training step of the d=256 Transformer (PyTorch's own profiler on
// nn.Transformer). Here the mask of element i is a counter-based hash of (seed, i), the seed one
// draw from LibTorch's default generator (runs stay reproducible from torch::manual_seed and
// exactly resumable from the saved generator state): drawing and applying it is one vectorised
// pass over the tensor, split over LibTorch's intra-op threads with the same result on any
// number of them, and the backward pass draws it again instead of storing it. The keep
// probability is quantised to 2^-32. CUDA tensors use LibTorch's dropout.
#pragma once

#include <torch/types.h>

namespace headcount::model {

// x * mask / (1 - p) in training, x otherwise; differentiable in x. A bf16 input comes out in
// fp32 (the kept value x / (1 - p) is not rounded) and its gradient goes back in bf16.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

}  // namespace headcount::model
