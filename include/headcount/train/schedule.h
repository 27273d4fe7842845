// Learning-rate schedules: pure functions of the optimizer step.
#pragma once

#include <cstdint>

namespace headcount::train {

// Linear warm-up from `init_lr` to `peak_lr` over `warmup` steps, then inverse square root decay
// (Vaswani et al. 2017; fairseq's inverse_sqrt): lr(s) = peak * sqrt(warmup / s) for s >= warmup.
// `step` counts optimizer updates from 0.
double inverse_sqrt_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr);
// The same warm-up, then `peak_lr` for good (for fine-tuning a converged model).
double constant_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr);

}  // namespace headcount::train
