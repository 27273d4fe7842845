// The number of parameters of a module: what every record's "parameters" counts (the trainable
// weights and biases a checkpoint's model.pt holds; the gates of a prune run are not the model's).
#pragma once

#include <torch/nn/module.h>

#include <cstdint>

namespace headcount::model {

inline int64_t parameter_count(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace headcount::model
