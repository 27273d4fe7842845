// Dropout with a fast mask generator. LibTorch's CPU dropout draws its mask with bernoulli_, one
// generator call per element: 17% of a training step of the d=256 Transformer (PyTorch's own
// profiler on nn.Transformer). Here a splitmix64 stream, seeded by one draw from LibTorch's default
// generator, fills the mask 4 elements per 64-bit draw; the seed draw keeps runs reproducible
// from torch::manual_seed and exactly resumable from the saved generator state. The keep
// probability is quantised to 1/65536. CUDA tensors use LibTorch's dropout.
#pragma once

#include <torch/types.h>

namespace headcount::model {

// x * mask / (1 - p) in training, x otherwise; differentiable in x.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

}  // namespace headcount::model
