// Config choices as enums: each is parsed from its name once, when the config is loaded (or a
// command-line flag is read), and the code past that point switches on the enum. One table per
// enum holds its names, used for parsing, for writing the config back and for error messages.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "headcount/common/check.h"

namespace headcount {

// train.lr_schedule: what follows the warm-up.
enum class LrSchedule { kInverseSqrt, kConstant, kCosine, kLinear };
// train.best_metric: what picks the best checkpoint.
enum class BestMetric { kBleu, kLoss };
// prune.lambda_schedule: how lambda changes with the step.
enum class LambdaScheduleKind { kConstant, kLinear, kPiecewise };
// prune.penalty_norm: L_C as the sum of P_open over gated heads, or the mean over gated layers of
// their sums.
enum class PenaltyNorm { kSum, kLayerMean };
// prune.noise: one gate draw per head per batch, or per head per example.
enum class GateNoise { kHead, kExample };
// prune.target_split: how target mode's one total is split between the gated attention types when
// the mask is fixed or exported: the largest log_alpha over all gated heads, or each type's share
// of the gates' expected open heads (include/headcount/prune/head_gates.h: split_by_expected).
enum class TargetSplit { kTop, kExpected };
// prune.method: gated fine-tuning, or post-training Fisher masks.
enum class PruneMethod { kL0, kFisher };
// prune.reconstruct_mode: where Fisher's least-squares refit takes each layer's inputs and target
// from (include/headcount/prune/fisher.h).
enum class ReconstructMode { kOnePass, kSequential, kSequentialStream };

// model.activation: the feed-forward network's nonlinearity (swish = SiLU = x sigmoid(x), as
// Marian / OPUS-MT; gelu the exact erf form).
enum class Activation { kRelu, kGelu, kSwish };
// model.positions: sinusoid layout. interleaved: sin at even features, cos at odd (Vaswani et al.,
// tensor2tensor's reference code interleaves too); halves: sin in the first half, cos in the
// second (fairseq, Marian / HF MarianMT).
enum class PositionLayout { kInterleaved, kHalves };

template <typename E>
struct ChoiceNames;  // specialised below: `static constexpr std::array<std::pair<E, ...>> table`

#define HC_CHOICES(E, N, ...)                                                               \
  template <>                                                                               \
  struct ChoiceNames<E> {                                                                   \
    static constexpr std::array<std::pair<E, std::string_view>, N> table = {{__VA_ARGS__}}; \
  };

HC_CHOICES(LrSchedule, 4, {LrSchedule::kInverseSqrt, "inverse_sqrt"},
           {LrSchedule::kConstant, "constant"}, {LrSchedule::kCosine, "cosine"},
           {LrSchedule::kLinear, "linear"})
HC_CHOICES(BestMetric, 2, {BestMetric::kBleu, "bleu"}, {BestMetric::kLoss, "loss"})
HC_CHOICES(LambdaScheduleKind, 3, {LambdaScheduleKind::kConstant, "constant"},
           {LambdaScheduleKind::kLinear, "linear"}, {LambdaScheduleKind::kPiecewise, "piecewise"})
HC_CHOICES(PenaltyNorm, 2, {PenaltyNorm::kSum, "sum"}, {PenaltyNorm::kLayerMean, "layer_mean"})
HC_CHOICES(GateNoise, 2, {GateNoise::kHead, "head"}, {GateNoise::kExample, "example"})
HC_CHOICES(TargetSplit, 2, {TargetSplit::kTop, "top"}, {TargetSplit::kExpected, "expected"})
HC_CHOICES(PruneMethod, 2, {PruneMethod::kL0, "l0"}, {PruneMethod::kFisher, "fisher"})
HC_CHOICES(ReconstructMode, 3, {ReconstructMode::kOnePass, "one_pass"},
           {ReconstructMode::kSequential, "sequential"},
           {ReconstructMode::kSequentialStream, "sequential_stream"})

HC_CHOICES(Activation, 3, {Activation::kRelu, "relu"}, {Activation::kGelu, "gelu"},
           {Activation::kSwish, "swish"})
HC_CHOICES(PositionLayout, 2, {PositionLayout::kInterleaved, "interleaved"},
           {PositionLayout::kHalves, "halves"})

#undef HC_CHOICES

// The name of a choice, as configs spell it.
template <typename E>
std::string choice_name(E value) {
  for (const auto& [v, n] : ChoiceNames<E>::table) {
    if (v == value) return std::string(n);
  }
  return "?";
}

// "a, b, c": the names, for messages.
template <typename E>
std::string choice_list() {
  std::string out;
  for (const auto& [v, n] : ChoiceNames<E>::table) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// The choice with this name, or nothing.
template <typename E>
std::optional<E> find_choice(std::string_view name) {
  for (const auto& [v, n] : ChoiceNames<E>::table) {
    if (n == name) return v;
  }
  return std::nullopt;
}

// The choice with this name; an unknown name is an error naming `key` and the choices.
template <typename E>
E parse_choice(std::string_view name, std::string_view key) {
  const auto v = find_choice<E>(name);
  HC_CHECK(v.has_value(), "{}: expected one of {}, got '{}'", key, choice_list<E>(), name);
  return *v;
}

}  // namespace headcount
