#include "headcount/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace headcount::train {

double inverse_sqrt_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr) {
  if (step < 0) step = 0;
  if (warmup > 0 && step < warmup) {
    return init_lr + (peak_lr - init_lr) * static_cast<double>(step) / static_cast<double>(warmup);
  }
  if (warmup <= 0) return peak_lr / std::sqrt(static_cast<double>(std::max<int64_t>(step, 1)));
  return peak_lr * std::sqrt(static_cast<double>(warmup) / static_cast<double>(step));
}

double constant_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr) {
  if (warmup > 0 && step < warmup) return inverse_sqrt_lr(step, peak_lr, warmup, init_lr);
  return peak_lr;
}

namespace {
// Fraction of the decay phase done at `step`, in [0, 1].
double decay_progress(int64_t step, int64_t warmup, int64_t total) {
  const int64_t start = std::max<int64_t>(warmup, 0);
  if (total <= start) return 1.0;
  const double done = static_cast<double>(step - start) / static_cast<double>(total - start);
  return std::clamp(done, 0.0, 1.0);
}
}  // namespace

double cosine_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr, int64_t total) {
  if (warmup > 0 && step < warmup) return inverse_sqrt_lr(step, peak_lr, warmup, init_lr);
  return peak_lr * 0.5 * (1.0 + std::cos(M_PI * decay_progress(step, warmup, total)));
}

double linear_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr, int64_t total) {
  if (warmup > 0 && step < warmup) return inverse_sqrt_lr(step, peak_lr, warmup, init_lr);
  return peak_lr * (1.0 - decay_progress(step, warmup, total));
}

double scheduled_lr(LrSchedule schedule, int64_t step, double peak_lr, int64_t warmup,
                    double init_lr, int64_t total) {
  switch (schedule) {
    case LrSchedule::kConstant:
      return constant_lr(step, peak_lr, warmup, init_lr);
    case LrSchedule::kCosine:
      return cosine_lr(step, peak_lr, warmup, init_lr, total);
    case LrSchedule::kLinear:
      return linear_lr(step, peak_lr, warmup, init_lr, total);
    case LrSchedule::kInverseSqrt:
      break;
  }
  return inverse_sqrt_lr(step, peak_lr, warmup, init_lr);
}

}  // namespace headcount::train
