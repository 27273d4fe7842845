#include "headcount/prune/schedule.h"

#include <algorithm>

#include "headcount/common/check.h"

namespace headcount::prune {

double LambdaSchedule::at(int64_t step) const {
  if (kind == LambdaScheduleKind::kConstant) return value;
  if (kind == LambdaScheduleKind::kLinear) {
    if (warmup_steps <= 0 || step >= warmup_steps) return value;
    return value * static_cast<double>(std::max<int64_t>(step, 0)) /
           static_cast<double>(warmup_steps);
  }
  // piecewise: the value of the last breakpoint at or before `step`; 0 before the first.
  double v = 0.0;
  for (size_t i = 0; i < steps.size() && steps[i] <= step; ++i) v = values[i];
  return v;
}

void LambdaSchedule::validate() const {
  HC_CHECK(value >= 0, "lambda must be non-negative, got {}", value);
  if (kind == LambdaScheduleKind::kPiecewise) {
    HC_CHECK(!steps.empty() && steps.size() == values.size(),
             "a piecewise lambda needs as many steps as values ({} and {})", steps.size(),
             values.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      HC_CHECK(i == 0 || steps[i] > steps[i - 1],
               "piecewise lambda steps must increase: {} after {}", steps[i], steps[i - 1]);
      HC_CHECK(values[i] >= 0, "lambda must be non-negative, got {}", values[i]);
    }
  }
}

double target_fraction(int64_t step, double final_fraction, int64_t warmup_steps) {
  if (warmup_steps <= 0 || step >= warmup_steps) return final_fraction;
  const double progress =
      static_cast<double>(std::max<int64_t>(step, 0)) / static_cast<double>(warmup_steps);
  return 1.0 + (final_fraction - 1.0) * progress;
}

}  // namespace headcount::prune
