// Small tensors written out by hand, for tests.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace headcount::testing {

// A [rows, columns] double tensor from its rows.
inline torch::Tensor mat(const std::vector<std::vector<double>>& rows) {
  const auto t = static_cast<int64_t>(rows.size()), s = static_cast<int64_t>(rows[0].size());
  auto out = torch::zeros({t, s}, torch::kDouble);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < s; ++j) out[i][j] = rows[i][j];
  return out;
}

}  // namespace headcount::testing
