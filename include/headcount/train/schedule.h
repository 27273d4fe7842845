// Learning-rate schedules: pure functions of the optimizer step.
#pragma once

#include <cstdint>
#include <string>

#include "headcount/common/choices.h"

namespace headcount::train {

// Linear warm-up from `init_lr` to `peak_lr` over `warmup` steps, then inverse square root decay
// (Vaswani et al. 2017; fairseq's inverse_sqrt): lr(s) = peak * sqrt(warmup / s) for s >= warmup.
// `step` counts optimizer updates from 0.
double inverse_sqrt_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr);
// The same warm-up, then `peak_lr` for good (for fine-tuning a converged model).
double constant_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr);
// The same warm-up, then a decay to zero at `total` steps (train.max_steps), so that a run ends
// converged within a fixed budget: half a cosine wave (Loshchilov & Hutter 2017, without restarts),
// lr(s) = peak * (1 + cos(pi * (s - warmup) / (total - warmup))) / 2, or a straight line,
// lr(s) = peak * (total - s) / (total - warmup). Zero from `total` on.
double cosine_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr, int64_t total);
double linear_lr(int64_t step, double peak_lr, int64_t warmup, double init_lr, int64_t total);
// The schedule train.lr_schedule chose.
double scheduled_lr(LrSchedule schedule, int64_t step, double peak_lr, int64_t warmup,
                    double init_lr, int64_t total);

}  // namespace headcount::train
