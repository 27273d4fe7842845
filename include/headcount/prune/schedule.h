// The penalty coefficient lambda as a pure function of the fine-tuning step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headcount/common/choices.h"

namespace headcount::prune {

struct LambdaSchedule {
  LambdaScheduleKind kind = LambdaScheduleKind::kConstant;
  double value = 0.0;          // constant, and the end value of linear
  int64_t warmup_steps = 0;    // linear: from 0 at step 0 to `value` at this step
  std::vector<int64_t> steps;  // piecewise: from steps[i] on, lambda = values[i]
  std::vector<double> values;

  double at(int64_t step) const;
  // Throws with what is wrong (unsorted steps, lengths that differ, negative values).
  void validate() const;
};

// The Lagrangian target of Wang et al. (2020) / CoFi: the expected share of heads kept, ramped
// linearly from 1 (nothing pruned) at step 0 to `final_fraction` at `warmup_steps`.
double target_fraction(int64_t step, double final_fraction, int64_t warmup_steps);

}  // namespace headcount::prune
