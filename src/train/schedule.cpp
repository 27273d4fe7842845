#include "headcount/train/schedule.h"

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

}  // namespace headcount::train
