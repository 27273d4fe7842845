#include "headcount/prune/prune_trainer.h"

#include <fmt/ranges.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <set>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/run_guard.h"
#include "headcount/model/loss.h"
#include "headcount/model/parameters.h"
#include "headcount/prune/outcome.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"

namespace headcount::prune {

namespace {

// The heads of a target group ("5" or "5 enc_self"), for the log.
std::string group_heads(const TargetGroup& g, int64_t n) {
  return g.name == "all" ? fmt::format("{}", n) : fmt::format("{} {}", n, g.name);
}

// Target mode ends with exactly the group's heads: how the final gates were rounded to them.
void log_target_rounding(const TargetGroup& g, int64_t open_by_gates) {
  const int64_t n = g.heads;
  if (open_by_gates < n)
    log::info(
        "target {} heads: the gates left {} open; the {} closed heads with the largest "
        "log_alpha are kept at their expected gate value",
        group_heads(g, n), open_by_gates, n - open_by_gates);
  else if (open_by_gates > n)
    log::info(
        "target {} heads: the gates left {} open; the {} with the smallest log_alpha are "
        "removed",
        group_heads(g, n), open_by_gates, open_by_gates - n);
  else
    log::info("target {} heads: the gates left exactly {} open", group_heads(g, n), open_by_gates);
}

// prune.target_split expected: how one total is split between its types, and the gates' expected
// open heads it was split by.
void log_expected_split(const HeadGatesImpl& gates, const TargetGroup& g, double floor) {
  const auto counts = expected_split(gates, g.heads, g.types, floor);
  std::vector<std::string> parts;
  for (size_t i = 0; i < g.types.size(); ++i) {
    const double e = gates.expected_open({g.types[i]}).item<double>();
    if (floor > 0)
      parts.push_back(fmt::format("{} {} (E[open] {:.2f}, {:.2f} at P_open >= {})",
                                  model::attention_name(g.types[i]), counts[i], e,
                                  counted_open(gates, g.types[i], floor), floor));
    else
      parts.push_back(
          fmt::format("{} {} (E[open] {:.2f})", model::attention_name(g.types[i]), counts[i], e));
  }
  log::info(
      "target {} heads split between the types by the gates' expected open heads "
      "(prune.target_split expected{}): {}",
      g.heads, floor > 0 ? fmt::format(", prune.split_floor {}", floor) : std::string(),
      fmt::join(parts, ", "));
}

// Target mode as the log states it.
std::string target_text(const std::vector<TargetGroup>& groups, int64_t warmup_steps) {
  if (groups.size() == 1 && groups.front().name == "all")
    return fmt::format("target {} heads (Lagrangian, ramp {} steps)", groups.front().heads,
                       warmup_steps);
  std::vector<std::string> parts;
  for (const auto& g : groups) parts.push_back(group_heads(g, g.heads));
  return fmt::format("target {} heads (a Lagrangian per type, ramp {} steps)",
                     fmt::join(parts, ", "), warmup_steps);
}

// A group's target count at `step` (its ramp).
double target_now(const TargetGroup& g, int64_t step, int64_t warmup_steps, double gated) {
  return target_fraction(step, static_cast<double>(g.heads) / gated, warmup_steps) * gated;
}

// The lambda schedule as the log states it.
std::string lambda_text(const PruneConfig& p) {
  if (p.lambda_schedule == LambdaScheduleKind::kPiecewise)
    return fmt::format("lambda {} from steps {} (piecewise)", fmt::join(p.lambda_values, ", "),
                       fmt::join(p.lambda_steps, ", "));
  return fmt::format("lambda {} ({})", p.lambda, choice_name(p.lambda_schedule));
}

}  // namespace

L0Pruning::L0Pruning(const Config& config, const train::TrainOptions& options)
    : config_(config), options_(options) {
  const auto& p = config_.prune;
  schedule_.kind = p.lambda_schedule;
  schedule_.value = p.lambda;
  schedule_.warmup_steps = p.lambda_warmup_steps;
  for (double s : p.lambda_steps) schedule_.steps.push_back(static_cast<int64_t>(s));
  schedule_.values = p.lambda_values;
  schedule_.validate();
  if (p.recovery_steps > 0) fix_step_ = config_.train.max_steps - p.recovery_steps;
}

void L0Pruning::fix_mask(int64_t step) {
  torch::NoGradGuard no_grad;
  fixed_at_ = step;
  // prune.rewind: the weights the mask applies to are the unpruned model's, trained with every head
  // at full strength, so a kept head is kept at 1 (the gates' fractional eval values, up to which
  // the gated weights had co-adapted, would scale the rewound heads down).
  fixed_values_ = fixed_mask_values(*gates_, config_.prune);
  if (config_.prune.target_split == TargetSplit::kExpected)
    for (const auto& g : targets_)
      if (g.types.size() > 1) log_expected_split(*gates_, g, config_.prune.split_floor);
  fixed_log_alpha_.clear();
  for (const auto& l : gates_->layers()) fixed_log_alpha_.push_back(l.gate->log_alpha.clone());
  if (!frozen_weights_.empty()) {
    for (auto& p : frozen_weights_) p.set_requires_grad(true);
    frozen_weights_.clear();
    log::info("step {}: the weights train from here on (prune.freeze_until_fixed)", step);
  }
  int64_t kept = 0;
  for (const auto& [key, v] : *fixed_values_) kept += v.gt(0).sum().item<int64_t>();
  if (config_.prune.stop_at_fix) {
    log::info(
        "step {}: the mask is fixed ({} of {} gated heads kept); the run ends here "
        "(prune.stop_at_fix)",
        step, kept, gates_->total_heads());
    return;
  }
  if (!config_.prune.gate_seeds.empty()) {
    log::info(
        "step {}: the mask of the gate runs' mean is fixed ({} of {} gated heads kept); {} steps "
        "fine-tune {}'s weights under it (prune.recovery_steps)",
        step, kept, gates_->total_heads(), end_step(config_.train.max_steps) - step,
        options_.init_from ? options_.init_from->string() : std::string("prune.init_from"));
    return;
  }
  log::info(
      "step {}: the mask is fixed ({} of {} gated heads kept{}); the remaining {} steps train "
      "the weights under it (prune.recovery_steps)",
      step, kept, gates_->total_heads(),
      step < fix_step_ ? ", the expected open heads reached the target: prune.fix_at_target" : "",
      end_step(config_.train.max_steps) - step);
}

void L0Pruning::fix_during_run(int64_t step) {
  fix_mask(step);
  // prune.stop_at_fix: the run ends here; its weights are not what it is for.
  if (config_.prune.rewind && !config_.prune.stop_at_fix) rewind_weights();
}

fs::path gate_seed_run(const fs::path& run_dir, int64_t seed) {
  return run_dir / "gate-seeds" / fmt::format("seed-{}", seed);
}

Config gate_seed_config(const Config& config, int64_t seed) {
  Config c = config;
  c.seed = static_cast<int>(seed);
  c.prune.gate_seeds.clear();
  c.prune.stop_at_fix = true;
  // How the total is split between the types changes no step of the gated run (the mask is fixed
  // when the total E[open] reaches the target), only the mask it would keep, and this run keeps
  // the mask its own rule takes from the gate runs' mean: so gate runs with any split floor are the
  // same runs, and a finished one serves every floor.
  c.prune.split_floor = 0;
  return c;
}

void L0Pruning::average_gate_runs() {
  torch::NoGradGuard no_grad;
  const auto& seeds = config_.prune.gate_seeds;
  const auto& layers = gates_->layers();
  std::vector<torch::Tensor> sum(layers.size());
  std::vector<std::string> own;  // each gate run's kept heads per type, for the log
  for (double s : seeds) {
    const auto seed = static_cast<int64_t>(s);
    const fs::path dir = gate_seed_run(options_.run_dir, seed);
    const run::CheckpointFolder last{run::RunFolder{dir}.last()};
    std::error_code ec;
    HC_CHECK(fs::exists(run::RunFolder{dir}.summary(), ec) && fs::exists(last.gates(), ec),
             "prune.gate_seeds: the gate run {} has not finished (no summary.json or no "
             "checkpoints/last/gates.pt): run the same prune command to finish it",
             dir.string());
    const auto state = nlohmann::json::parse(
        run::read_checkpoint_file(last.dir, run::CheckpointFolder::kPruneState));
    HC_CHECK(state.contains("mask_fixed_at"),
             "prune.gate_seeds: the gate run {} ended without fixing its mask ({} has no "
             "mask_fixed_at)",
             dir.string(), last.prune_state().string());
    model::load_weights(*gates_, run::load_weights_file(last.gates()), last.gates().string());
    std::map<model::AttentionType, int64_t> kept;
    const auto values = fixed_mask_values(*gates_, config_.prune);
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto p = layers[i].gate->p_open().to(torch::kFloat64);
      sum[i] = sum[i].defined() ? sum[i] + p : p;
      kept[layers[i].type] += values.at(HeadGatesImpl::key(layers[i].type, layers[i].layer))
                                  .gt(0)
                                  .sum()
                                  .item<int64_t>();
    }
    std::vector<std::string> parts;
    for (const auto& [t, n] : kept) parts.push_back(fmt::format("{}", n));
    own.push_back(fmt::format("seed {} (fixed at step {}) {}", seed,
                              state.at("mask_fixed_at").get<int64_t>(), fmt::join(parts, "/")));
  }
  // log_alpha = logit(mean P_open) + beta log(-l / r): P_open = sigmoid(log_alpha - beta
  // log(-l/r)).
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& o = layers[i].gate->options();
    const double shift = o.temperature * std::log(-o.stretch_low / o.stretch_high);
    const auto mean = (sum[i] / static_cast<double>(seeds.size())).clamp(1e-12, 1 - 1e-12);
    layers[i].gate->log_alpha.copy_(torch::logit(mean) + shift);
  }
  log::info("prune.gate_seeds: the gates are the mean P_open of {} gate runs (kept e/d/de: {})",
            seeds.size(), fmt::join(own, "; "));
}

void L0Pruning::rewind_weights() {
  torch::NoGradGuard no_grad;
  model::Transformer init = teacher_;
  if (!init) init = run::load_model(run::read_checkpoint_info(*options_.init_from), device_);
  const auto from_params = init->named_parameters();
  const auto from_buffers = init->named_buffers();
  for (auto& p : model_->named_parameters()) p.value().copy_(from_params[p.key()]);
  for (auto& b : model_->named_buffers()) b.value().copy_(from_buffers[b.key()]);
  optimizer_reset_ = true;
  log::info(
      "step {}: the model's weights are {}'s again (prune.rewind); the optimizer and the "
      "learning-rate warm-up start afresh for the {} recovery steps",
      fixed_at_, options_.init_from->string(), end_step(config_.train.max_steps) - fixed_at_);
}

bool L0Pruning::take_optimizer_reset() {
  const bool r = optimizer_reset_;
  optimizer_reset_ = false;
  return r;
}

int64_t L0Pruning::schedule_start() const {
  return config_.prune.rewind && fixed() ? fixed_at_ : 0;
}

int64_t L0Pruning::end_step(int64_t max_steps) const {
  if (config_.prune.stop_at_fix && fixed()) return fixed_at_;
  // fixed_at_ <= max_steps - recovery_steps (the latest fixing point), so this is never later.
  if (!config_.prune.exact_recovery || !fixed()) return max_steps;
  return fixed_at_ + config_.prune.recovery_steps;
}

int64_t L0Pruning::latest_end_step(int64_t max_steps) const {
  if (config_.prune.stop_at_fix && !fixed() && fix_step_ >= 0) return fix_step_;
  return end_step(max_steps);
}

std::map<std::string, torch::Tensor> L0Pruning::mask_values() {
  return fixed() ? *fixed_values_ : final_values();
}

train::TrainSummary prune_command(const Config& config, const train::TrainOptions& options) {
  const auto& seeds = config.prune.gate_seeds;
  for (size_t i = 0; i < seeds.size(); ++i) {
    const auto seed = static_cast<int64_t>(seeds[i]);
    train::TrainOptions o = options;
    o.run_dir = gate_seed_run(options.run_dir, seed);
    const Config c = gate_seed_config(config, seed);
    const auto lock = train::check_run_folder(c, o.run_dir, o.rank);
    std::error_code ec;
    if (fs::exists(run::RunFolder{o.run_dir}.summary(), ec)) {
      log::info("prune.gate_seeds: gate run {} has finished", o.run_dir.string());
      continue;
    }
    fs::create_directories(o.run_dir);
    log::info("prune.gate_seeds: gate run {} ({} of {}): the gated steps with seed {}",
              o.run_dir.string(), i + 1, seeds.size(), seed);
    PruneTrainer gate_run(c, o);
    const auto summary = gate_run.run();
    if (summary.interrupted) return summary;
  }
  PruneTrainer trainer(config, options);
  return trainer.run();
}

PruneTrainer::PruneTrainer(Config config, train::TrainOptions options)
    : PruneTrainer(std::make_unique<L0Pruning>(config, options), config, options) {}

PruneTrainer::PruneTrainer(std::unique_ptr<L0Pruning> l0, const Config& config,
                           const train::TrainOptions& options)
    : l0_(l0.get()), trainer_(config, options, std::move(l0)) {}

std::vector<train::ParamGroup> L0Pruning::parameter_groups(model::Transformer& model,
                                                           const torch::Device& device) {
  model_ = model;
  const auto types = gated_types(config_.prune);
  HC_CHECK(!types.empty(), "prune.attention is empty: nothing to gate");
  for (auto t : types) {
    HC_CHECK(model_->architecture().total(t) > 0,
             "prune.attention lists {} but the model has no {} heads left",
             model::attention_name(t), model::attention_name(t));
  }
  gates_ = HeadGates(model_, types, gate_options(config_.prune));
  gates_->to(device);
  device_ = device;
  HC_CHECK(!config_.prune.rewind || options_.init_from,
           "prune.rewind needs the unpruned model to go back to (prune.init_from)");
  if (config_.prune.distill_weight > 0) {
    HC_CHECK(options_.init_from,
             "prune.distill_weight needs the unpruned model to distil from (prune.init_from)");
    teacher_ = run::load_model(run::read_checkpoint_info(*options_.init_from), device);
    teacher_->eval();
    for (auto& p : teacher_->parameters()) p.set_requires_grad(false);
    log::info("distillation from {} (weight {}, temperature {})", options_.init_from->string(),
              config_.prune.distill_weight, config_.prune.distill_temperature);
  }
  const int64_t total = gates_->total_heads();
  set_targets();
  // prune.gate_seeds: the mask is the gate runs' from the first step (a resumed run's checkpoint
  // holds these gates again and fixes the same mask in load()). The weights are
  // prune.init_from's already: nothing to rewind.
  if (!config_.prune.gate_seeds.empty()) {
    average_gate_runs();
    fix_mask(0);
  }
  // Freezing: parts not listed in prune.train_parts keep their weights.
  const auto& parts = config_.prune.train_parts;
  auto wants = [&](const char* part) {
    return std::find(parts.begin(), parts.end(), part) != parts.end();
  };
  std::set<torch::TensorImpl*> trained;
  auto add = [&](const std::vector<torch::Tensor>& ps) {
    for (const auto& p : ps) trained.insert(p.unsafeGetTensorImpl());
  };
  if (wants("encoder")) {
    for (auto& l : model_->encoder_layers) add(l->parameters());
    if (model_->encoder_norm) add(model_->encoder_norm->parameters());
  }
  if (wants("decoder")) {
    for (auto& l : model_->decoder_layers) add(l->parameters());
    if (model_->decoder_norm) add(model_->decoder_norm->parameters());
  }
  if (wants("embeddings"))
    add({model_->src_embed->weight, model_->tgt_embed->weight, model_->output_weight});
  std::vector<torch::Tensor> trained_parameters;
  for (auto& p : model_->parameters()) {
    const bool train = trained.count(p.unsafeGetTensorImpl()) > 0;
    p.set_requires_grad(train);
    if (train) trained_parameters.push_back(p);
  }
  // prune.freeze_until_fixed: the weights get no gradient until fix_mask (a resumed run whose
  // mask was already fixed trains them from the start).
  const bool freeze = config_.prune.freeze_until_fixed && !fixed() && !trained_parameters.empty();
  if (freeze) {
    for (auto& p : trained_parameters) p.set_requires_grad(false);
    frozen_weights_ = trained_parameters;
  }
  log::info("pruning: gates on {} heads ({}), training the gates{}{}{}; {}", total,
            fmt::join(config_.prune.attention, ", "), parts.empty() ? " alone" : " and ",
            fmt::join(parts, ", "),
            freeze ? " (the weights only once the mask is fixed: prune.freeze_until_fixed)" : "",
            !targets_.empty() ? target_text(targets_, config_.prune.target_warmup_steps)
                              : fmt::format("{}, L_C normalised as {}", lambda_text(config_.prune),
                                            choice_name(config_.prune.penalty_norm)));
  // The model's trained parts at the scheduled rate, the gates at prune.gate_lr.
  std::vector<train::ParamGroup> groups;
  if (!trained_parameters.empty()) groups.push_back({trained_parameters, std::nullopt});
  groups.push_back({gates_->parameters(), config_.prune.gate_lr, /*model_weights=*/false});
  return groups;
}

void L0Pruning::set_targets() {
  const auto& p = config_.prune;
  targets_ = target_groups(p);
  if (!p.target_heads_per_type.empty()) {
    const auto gated = gated_types(p);
    const auto& arch = model_->architecture();
    for (size_t i = 0; i < std::size(model::kAttentionTypes); ++i) {
      const auto t = model::kAttentionTypes[i];
      const auto n = static_cast<int64_t>(p.target_heads_per_type[i]);
      HC_CHECK(std::find(gated.begin(), gated.end(), t) != gated.end() || n == arch.total(t),
               "prune.target_heads_per_type asks for {} {} heads, but {} is not in "
               "prune.attention ({}): it keeps all {} of its heads; give {} or gate it",
               n, model::attention_name(t), model::attention_name(t), fmt::join(p.attention, ", "),
               arch.total(t), arch.total(t));
    }
  }
  for (const auto& g : targets_) {
    const int64_t gated = gates_->total_heads(g.types);
    if (g.name == "all")
      HC_CHECK(g.heads <= gated,
               "prune.target_heads ({}) is larger than the number of gated heads ({})", g.heads,
               gated);
    else
      HC_CHECK(g.heads <= gated,
               "prune.target_heads_per_type asks for {} {} heads, but the model has {}", g.heads,
               g.name, gated);
  }
  lambda1_.assign(targets_.size(), 0.0);
  lambda2_.assign(targets_.size(), 0.0);
}

bool L0Pruning::reached_target(int64_t steps_done) const {
  if (targets_.empty() || steps_done < config_.prune.target_warmup_steps) return false;
  torch::NoGradGuard no_grad;
  for (const auto& g : targets_)
    if (gates_->expected_open(g.types).item<double>() > static_cast<double>(g.heads)) return false;
  return true;
}

void L0Pruning::begin_step() {
  if (!fixed() && config_.prune.noise == GateNoise::kHead) gates_->draw_step_noise();
}

void L0Pruning::before_forward(const data::Batch& batch) {
  if (fixed()) {
    gates_->apply_values(*fixed_values_);
  } else if (config_.prune.noise == GateNoise::kHead) {
    gates_->apply_step_sample();  // one draw per step (begin_step), shared by its batches
  } else {
    gates_->apply_sample(batch.size());
  }
}

torch::Tensor L0Pruning::batch_objective(const data::Batch& batch, const torch::Tensor& logits,
                                         const torch::Tensor& loss,
                                         const PrecisionChoice& precision) {
  const double w = config_.prune.distill_weight;
  if (w == 0) return loss;
  torch::Tensor teacher_logits;
  {
    torch::NoGradGuard no_grad;
    PrecisionScope scope(precision, device_);
    teacher_logits = teacher_->forward(batch.src, batch.tgt_in);
  }
  return loss * (1 - w) + w * model::distillation_loss(logits, teacher_logits, batch.tgt_out,
                                                       config_.prune.distill_temperature);
}

train::Regulariser L0Pruning::regulariser(int64_t step) {
  const auto& p = config_.prune;
  // Recovery: cross-entropy alone (the gates are not in the graph).
  if (fixed()) return {};
  if (!targets_.empty()) {
    // Target mode: per group, the gap between the expected fraction of its heads open and its
    // target fraction (ramped over prune.target_warmup_steps), in the Lagrangian
    // lambda1 gap + lambda2 gap^2; the groups' terms add up.
    train::Regulariser r;
    for (size_t i = 0; i < targets_.size(); ++i) {
      const auto& g = targets_[i];
      const double n = static_cast<double>(gates_->total_heads(g.types));
      const double t = target_fraction(step, g.heads / n, p.target_warmup_steps);
      auto gap = gates_->expected_open(g.types) / n - t;
      auto term = lambda1_[i] * gap + lambda2_[i] * gap * gap;
      r.term = r.term.defined() ? r.term + term : term;
      r.constraints.push_back(gap.item<double>());
    }
    return r;
  }
  // lambda(step) x L_C (lambda 0 still gives the gates a zero gradient).
  const double lambda = schedule_.at(step);
  if (lambda == 0) return {gates_->penalty(p.penalty_norm) * 0.0, {}};
  return {lambda * gates_->penalty(p.penalty_norm), {}};
}

void L0Pruning::after_step(int64_t step, const train::Regulariser& r) {
  if (fixed()) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < gates_->layers().size(); ++i)
      gates_->layers()[i].gate->log_alpha.copy_(fixed_log_alpha_[i]);
    return;
  }
  // `step` steps done before this one: the mask is fixed once step + 1 reach fix_step_.
  if (fix_step_ >= 0 && step + 1 >= fix_step_) {
    fix_during_run(step + 1);
    return;
  }
  // prune.fix_at_target: the ramp is over and, after this step's update, E[open] is at or below
  // the target (every group's).
  if (config_.prune.fix_at_target && reached_target(step + 1)) {
    fix_during_run(step + 1);
    return;
  }
  // Gradient ascent on each group's multipliers: d/dlambda1 = gap, d/dlambda2 = gap^2.
  HC_CHECK(r.constraints.size() == targets_.size(), "{} constraint values for {} target groups",
           r.constraints.size(), targets_.size());
  for (size_t i = 0; i < targets_.size(); ++i) {
    const double gap = r.constraints[i];
    lambda1_[i] += config_.prune.lagrangian_lr * gap;
    lambda2_[i] += config_.prune.lagrangian_lr * gap * gap;
  }
}

std::map<std::string, torch::Tensor> L0Pruning::final_values() {
  return prune::final_values(*gates_, config_.prune);
}

void L0Pruning::begin_evaluation() {
  if (finished_ || fixed()) {
    gates_->apply_values(mask_values());
  } else {
    gates_->apply_eval();
  }
}

std::map<model::AttentionType, int64_t> L0Pruning::open_heads() {
  auto open = gates_->open_heads();
  if (fixed()) {
    open.clear();
    for (const auto& l : gates_->layers())
      open[l.type] +=
          fixed_values_->at(HeadGatesImpl::key(l.type, l.layer)).gt(0).sum().item<int64_t>();
  }
  return open;
}

void L0Pruning::evaluation_extras(int64_t step, nlohmann::json& record) {
  torch::NoGradGuard no_grad;
  const auto open = open_heads();
  const auto& arch = model_->architecture();
  nlohmann::json open_json;
  std::vector<int64_t> counts;
  for (auto t : model::kAttentionTypes) {
    const auto it = open.find(t);
    const int64_t n = it != open.end() ? it->second : arch.total(t);
    if (it != open.end()) open_json[model::attention_name(t)] = n;
    counts.push_back(n);
  }
  record["open_heads"] = open_json;
  record["heads_e_d_de"] = fmt::format("{}/{}/{}", counts[0], counts[1], counts[2]);
  record["expected_open"] = gates_->expected_open().item<double>();
  if (fixed()) record["mask_fixed"] = true;
  if (!targets_.empty()) {
    target_record(step, record);
  } else {
    record["lambda"] = schedule_.at(step);
  }
  log::info("step {} | heads open (enc/dec/enc-dec) {} | expected open {:.1f}{}", step,
            record["heads_e_d_de"].get<std::string>(), record["expected_open"].get<double>(),
            !targets_.empty() ? target_log(record) : "");
  if (options_.rank != 0) return;
  run::GateSnapshot snapshot;
  snapshot.step = step;
  snapshot.dev_bleu = record.value("dev_bleu", 0.0);
  snapshot.final = finished_;
  const auto values = finished_ || fixed() ? mask_values() : gates_->eval_values();
  for (const auto& l : gates_->layers()) {
    const auto p_open = l.gate->p_open().detach().to(torch::kCPU);
    const auto g = values.at(HeadGatesImpl::key(l.type, l.layer)).to(torch::kCPU);
    for (int64_t h = 0; h < l.gate->num_heads(); ++h) {
      snapshot.heads.push_back(
          {{l.type, l.layer, h}, p_open[h].item<double>(), g[h].item<double>()});
    }
  }
  run::append_gates(run::RunFolder{options_.run_dir}.gates(), snapshot);
}

// " | target T" of an evaluation's log line; per type " | target T (enc_self T1, E[open] E1; ...)".
std::string L0Pruning::target_log(const nlohmann::json& record) const {
  std::string out = fmt::format(" | target {:.1f}", record["target_now"].get<double>());
  if (!record.contains("target_now_per_type")) return out;
  std::vector<std::string> parts;
  for (const auto& g : targets_)
    parts.push_back(fmt::format("{} {:.1f}, E[open] {:.1f}", g.name,
                                record["target_now_per_type"][g.name].get<double>(),
                                record["expected_open_per_type"][g.name].get<double>()));
  return out + fmt::format(" ({})", fmt::join(parts, "; "));
}

void L0Pruning::target_record(int64_t step, nlohmann::json& record) {
  // One group (prune.target_heads): the keys as numbers; per type, also each type's values.
  int64_t heads = 0;
  double now = 0;
  nlohmann::json heads_t, now_t, expected_t, l1_t, l2_t;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const auto& g = targets_[i];
    const double t = target_now(g, step, config_.prune.target_warmup_steps,
                                static_cast<double>(gates_->total_heads(g.types)));
    heads += g.heads;
    now += t;
    heads_t[g.name] = g.heads;
    now_t[g.name] = t;
    expected_t[g.name] = gates_->expected_open(g.types).item<double>();
    l1_t[g.name] = lambda1_[i];
    l2_t[g.name] = lambda2_[i];
  }
  record["target_heads"] = heads;
  record["target_now"] = now;
  if (targets_.size() == 1 && targets_.front().name == "all") {
    // Each gated type's share of the expected open heads (what prune.target_split expected splits
    // the total by).
    for (auto t : targets_.front().types)
      record["expected_open_per_type"][model::attention_name(t)] =
          gates_->expected_open({t}).item<double>();
    record["lambda1"] = lambda1_.front();
    record["lambda2"] = lambda2_.front();
    return;
  }
  record["target_heads_per_type"] = heads_t;
  record["target_now_per_type"] = now_t;
  record["expected_open_per_type"] = expected_t;
  record["lambda1_per_type"] = l1_t;
  record["lambda2_per_type"] = l2_t;
}

void L0Pruning::save(const fs::path& dir) {
  run::save_weights(run::CheckpointFolder{dir}.gates(), model::named_weights(*gates_));
  // One group: the multipliers as numbers, as checkpoints before per-type targets have them (and
  // lambda mode a 0 for its unused pair); per type, one value per group.
  auto multipliers = [&](const std::vector<double>& v) {
    if (v.size() > 1) return nlohmann::json(v);
    return nlohmann::json(v.empty() ? 0.0 : v.front());
  };
  nlohmann::json j = {{"lambda1", multipliers(lambda1_)},
                      {"lambda2", multipliers(lambda2_)},
                      {"attention", config_.prune.attention}};
  if (fixed()) j["mask_fixed_at"] = fixed_at_;
  io::write_file_atomic(run::CheckpointFolder{dir}.prune_state(), j.dump(2) + "\n");
}

void L0Pruning::load(const fs::path& dir) {
  std::error_code ec;
  const run::CheckpointFolder ckpt{dir};
  HC_CHECK(fs::exists(ckpt.gates(), ec), "{}: no gates.pt (not a checkpoint of a prune run)",
           dir.string());
  model::load_weights(*gates_, run::load_weights_file(ckpt.gates()), ckpt.gates().string());
  const auto j =
      nlohmann::json::parse(run::read_checkpoint_file(dir, run::CheckpointFolder::kPruneState));
  // The multipliers: a number (one target group, or lambda mode's unused pair) or one per group.
  auto multipliers = [&](const char* key) {
    const auto& v = j.at(key);
    std::vector<double> out =
        v.is_array() ? v.get<std::vector<double>>() : std::vector<double>{v.get<double>()};
    HC_CHECK(out.size() == std::max<size_t>(targets_.size(), 1),
             "{}: {} has {} values, but the run's target has {} groups ({}): it was saved by a "
             "run with another prune.target_heads / prune.target_heads_per_type",
             ckpt.prune_state().string(), key, out.size(), targets_.size(),
             target_text(targets_, config_.prune.target_warmup_steps));
    out.resize(targets_.size());
    return out;
  };
  lambda1_ = multipliers("lambda1");
  lambda2_ = multipliers("lambda2");
  // A checkpoint of the recovery steps: the mask was fixed, from these gates (which stay).
  if (j.contains("mask_fixed_at")) {
    fix_mask(j.at("mask_fixed_at").get<int64_t>());
  } else if (fix_step_ >= 0) {
    const auto state = run::TrainState::from_json(
        nlohmann::json::parse(run::read_checkpoint_file(dir, run::CheckpointFolder::kState)),
        run::CheckpointFolder{dir}.state().string());
    if (state.step >= fix_step_) fix_mask(state.step);
  }
}

std::string L0Pruning::progress() {
  torch::NoGradGuard no_grad;
  const auto open = open_heads();
  std::vector<std::string> parts;
  for (const auto& [type, n] : open)
    parts.push_back(fmt::format("{} {}", model::attention_name(type), n));
  return fmt::format(" | {} heads {} | E[open] {:.1f}", fixed() ? "kept (mask fixed)" : "open",
                     fmt::join(parts, ", "), gates_->expected_open().item<double>());
}

void L0Pruning::finish(train::Trainer& trainer) {
  finished_ = true;
  const auto values = mask_values();
  const auto open_by_type = gates_->open_heads();
  int64_t open_by_gates = 0;
  for (const auto& [type, n] : open_by_type) open_by_gates += n;
  // With the mask fixed the pruned model is the fixed mask's, whatever the gates read now.
  const auto kept_by_type = open_heads();
  for (const auto& g : targets_) {
    const auto count = [&g](const std::map<model::AttentionType, int64_t>& by_type) {
      int64_t n = 0;
      for (auto t : g.types) n += by_type.count(t) ? by_type.at(t) : 0;
      return n;
    };
    if (fixed()) {
      log::info(
          "target {} heads: the mask fixed at step {} keeps {} (the final gates, which it "
          "overrides, would leave {} open)",
          group_heads(g, g.heads), fixed_at_, count(kept_by_type), count(open_by_type));
      continue;
    }
    log_target_rounding(g, count(open_by_type));
    if (config_.prune.target_split == TargetSplit::kExpected && g.types.size() > 1)
      log_expected_split(*gates_, g, config_.prune.split_floor);
  }
  const auto r = trainer.evaluate();
  nlohmann::json rec = {{"event", "final"},
                        {"step", trainer.state().step},
                        {"dev_loss", r.loss},
                        {"dev_bleu", r.bleu},
                        {"dev_chrf", r.chrf}};
  evaluation_extras(trainer.state().step, rec);
  trainer.log_metrics(rec);
  // The physically smaller model.
  torch::NoGradGuard no_grad;
  gates_->clear();
  auto pruned = prune_heads(model_, values);
  gates_->apply_values(values);
  const int64_t before = model::parameter_count(*model_);
  const int64_t after = model::parameter_count(*pruned);
  run::save_checkpoint(run::RunFolder{options_.run_dir}.pruned(), pruned, nullptr, trainer.state(),
                       config_, trainer.vocab_files());
  const std::string csv = write_head_removal_log(options_.run_dir);
  // Dev BLEU at step 0 (the converged model, gates fully open) from the metrics.
  const run::RunFolder folder{options_.run_dir};
  const auto start = run::eval_record(folder.metrics(), 0);
  const double start_bleu = start ? start->value("dev_bleu", 0.0) : 0.0;
  PruneOutcome o;
  o.init_from = options_.init_from ? options_.init_from->string() : "";
  o.attention_gated = config_.prune.attention;
  o.lambda = !targets_.empty() ? 0.0 : config_.prune.lambda;
  for (const auto& g : targets_) o.target_heads += g.heads;
  if (!config_.prune.target_heads_per_type.empty())
    for (double n : config_.prune.target_heads_per_type)
      o.target_heads_per_type.push_back(static_cast<int64_t>(n));
  o.steps = trainer.state().step;
  o.heads_before = model_->architecture().summary();
  o.architecture_after = pruned->architecture();
  o.heads_after = o.architecture_after.summary();
  o.heads_open_by_gates = open_by_gates;
  o.parameters_before = before;
  o.parameters_after = after;
  o.dev_bleu_start = start_bleu;
  o.dev_bleu_end = r.bleu;
  o.pruned_checkpoint = folder.pruned().string();
  write_prune_outcome(folder, o, csv);
  log::info(
      "pruned: heads {} -> {} (enc/dec/enc-dec), parameters {} -> {}, dev BLEU {:.2f} -> {:.2f}; "
      "wrote {}",
      model_->architecture().summary(), pruned->architecture().summary(), before, after, start_bleu,
      r.bleu, folder.pruned().string());
}

}  // namespace headcount::prune
