#include "headcount/train/trainer.h"

#include <fmt/ranges.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/run_guard.h"
#include "headcount/common/runtime.h"
#include "headcount/common/signals.h"
#include "headcount/model/loss.h"
#include "headcount/model/parameters.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"
#include "headcount/train/schedule.h"

namespace headcount::train {
namespace {

using log::duration;

// Seeds LibTorch's generator for one training batch from (seed, epoch, batch position).
void seed_batch(uint64_t seed, int64_t epoch, int64_t pos) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(epoch) * 0xBF58476D1CE4E5B9ULL +
               static_cast<uint64_t>(pos) * 0x94D049BB133111EBULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  torch::manual_seed(z ^ (z >> 31));
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

std::unique_ptr<torch::optim::Adam> make_adam(const std::vector<ParamGroup>& groups,
                                              const torch::optim::AdamOptions& options) {
  std::vector<torch::optim::OptimizerParamGroup> adam_groups;
  for (const auto& g : groups) {
    auto o = std::make_unique<torch::optim::AdamOptions>(options);
    if (!g.model_weights) o->weight_decay(0.0);
    adam_groups.emplace_back(g.params, std::move(o));
  }
  return std::make_unique<torch::optim::Adam>(adam_groups, options);
}

std::vector<torch::Tensor> clipped_parameters(const std::vector<ParamGroup>& groups) {
  std::vector<torch::Tensor> out;
  for (const auto& g : groups)
    if (g.model_weights) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void set_group_rates(torch::optim::Adam& adam, const std::vector<ParamGroup>& groups,
                     double scheduled) {
  for (size_t g = 0; g < groups.size(); ++g) {
    static_cast<torch::optim::AdamOptions&>(adam.param_groups()[g].options())
        .lr(groups[g].fixed_lr.value_or(scheduled));
  }
}

Trainer::Trainer(Config config, TrainOptions options, std::unique_ptr<TrainingExtension> extension)
    : config_(std::move(config)), options_(std::move(options)), extension_(std::move(extension)) {}

Trainer::~Trainer() = default;

void Trainer::init() {
  if (ready_) return;
  // Rank 0 prepares the corpus and the vocabulary first; the others then find them made.
  if (options_.comm && options_.rank != 0) options_.comm->barrier();
  inputs_ = load_training_inputs(config_, options_);
  batches_ = data::make_batches(inputs_.train, config_.train.max_tokens,
                                static_cast<uint64_t>(config_.seed));
  if (options_.comm && options_.rank == 0) options_.comm->barrier();
  // Parameter groups: the extension's, or every model parameter at the scheduled rate.
  groups_ = extension_ ? extension_->parameter_groups(inputs_.model, inputs_.device)
                       : std::vector<ParamGroup>{{inputs_.model->parameters(), std::nullopt}};
  params_.clear();
  for (const auto& g : groups_) params_.insert(params_.end(), g.params.begin(), g.params.end());
  clip_params_ = clipped_parameters(groups_);
  const auto& t = config_.train;
  optimizer_ = make_adam(groups_, torch::optim::AdamOptions(t.lr)
                                      .betas({t.adam_beta1, t.adam_beta2})
                                      .eps(t.adam_eps)
                                      .weight_decay(t.weight_decay));
  ready_ = true;
}

void Trainer::log_metrics(const nlohmann::json& record) {
  if (options_.rank != 0) return;
  run::append_jsonl(folder().metrics(), record);
}

void Trainer::save(const fs::path& dir) {
  if (options_.rank != 0) return;
  run::save_checkpoint(
      dir, inputs_.model, optimizer_.get(), state_, config_, inputs_.vocab_files,
      [this](const fs::path& tmp) {
        if (extension_) extension_->save(tmp);
      },
      inputs_.corpus.input_xxh64);
}

void Trainer::check_same_inputs(const run::CheckpointInfo& info) const {
  const fs::path meta = run::CheckpointFolder{info.dir}.meta();
  if (info.corpus_xxh64.empty())
    log::debug(
        "{}: records no training-corpus hashes (written before checkpoints recorded them): not "
        "checked",
        meta.string());
  for (const auto& [key, recorded] : info.corpus_xxh64) {
    const auto now = inputs_.corpus.input_xxh64.find(key);
    if (now == inputs_.corpus.input_xxh64.end()) continue;
    const auto& d = config_.data;
    const bool dev = key.rfind("dev_", 0) == 0;
    const fs::path file = data_path(d, key == "train_tgt" ? d.train_tgt
                                       : key == "dev_src" ? d.dev_src
                                       : key == "dev_tgt" ? d.dev_tgt
                                                          : d.train_src);
    const std::string consequence =
        dev ? "the resumed run would compare its dev scores (which decide `best` and early "
              "stopping) with scores on other sentences"
            : "the resumed run would train these weights on other data, with another vocabulary";
    HC_CHECK(now->second == recorded,
             "{}: the {} differs from the one this run started with (XXH64 {} now, {} recorded in "
             "{}): {}. Restore the file as it was, or start a new run with another --out "
             "(--init-from {} fine-tunes these weights on the new data, with their own vocabulary)",
             file.string(), dev ? "dev set" : "training corpus", now->second, recorded,
             meta.string(), consequence, info.dir.string());
  }
  for (const auto& [name, recorded] : info.vocab_fnv1a) {
    const auto& v = inputs_.vocab_files;
    const fs::path ours = name == "tgt.model"                    ? v.tgt_model
                          : name == data::piece_list_name("tgt") ? v.tgt_pieces
                          : name == data::kPieceListFile || name == data::piece_list_name("src")
                              ? v.pieces
                              : v.src_model;
    const std::string now = io::hex64(io::hash_file(ours));
    if (now == recorded) continue;
    const fs::path cache = ours.parent_path();
    const std::string what_to_do =
        options_.init_from
            ? fmt::format(
                  "the checkpoint {} the run started from has another vocabulary now: "
                  "restore it",
                  options_.init_from->string())
        : inputs_.vocab_files.from_cache
            ? fmt::format(
                  "the cache entry was replaced: remove {} to have it trained again from "
                  "the same corpus and options (the same bytes), or copy {} there",
                  cache.string(), run::CheckpointFolder{info.dir}.vocab(name).string())
            : "a new vocabulary was trained: the training files or the vocab.* options differ "
              "from the run's; restore them, or start a new run with another --out";
    HC_FAIL(
        "{}: not the vocabulary the checkpoint {} was trained with (FNV-1a {} now, {} recorded "
        "in {}): the weights' token ids would mean other words. {}",
        ours.string(), info.dir.string(), now, recorded, meta.string(), what_to_do);
  }
}

void Trainer::check_step_checkpoints() const {
  const run::RunFolder f = folder();
  for (const int64_t n : f.checkpoint_steps()) {
    HC_CHECK(n <= state_.step,
             "{}: a checkpoint of step {}, later than the step of {} ({}): a damaged or edited "
             "run folder; restore {} from a copy",
             f.step_checkpoint(n).string(), n, run::CheckpointFolder{f.last()}.state().string(),
             state_.step, f.last().string());
  }
}

void Trainer::check_best_checkpoint() const {
  const run::RunFolder f = folder();
  const fs::path last_state = run::CheckpointFolder{f.last()}.state();
  std::error_code ec;
  if (fs::exists(f.best(), ec)) {
    const auto best = run::read_checkpoint_info(f.best());
    HC_CHECK(best.state.step == state_.best_step,
             "{}: 'step' is {}, but {} records the best evaluation at step {}: a damaged or "
             "edited checkpoint; restore it from a copy (or remove {} to resume without it)",
             run::CheckpointFolder{f.best()}.state().string(), best.state.step, last_state.string(),
             state_.best_step, f.best().string());
  }
}

void Trainer::check_batch_position(const run::CheckpointInfo& info) const {
  const auto batches = static_cast<int64_t>(batches_.size());
  if (state_.batch_in_epoch <= batches) return;
  // Only a changed batch size makes an epoch's batches fewer than the checkpoint's position.
  HC_CHECK(info.config.train.max_tokens != config_.train.max_tokens,
           "{}: 'batch_in_epoch' is {}, but an epoch of this run has {} batches: a damaged or "
           "edited checkpoint; restore it from a copy",
           run::CheckpointFolder{info.dir}.state().string(), state_.batch_in_epoch, batches);
  log::info(
      "train.max_tokens changed: the resumed epoch's batches differ; starting the next epoch");
}

void Trainer::resume_from(const fs::path& dir) {
  const auto info = run::read_checkpoint_info(dir);
  check_same_inputs(info);
  HC_CHECK(info.architecture == inputs_.model->architecture(),
           "{}: the checkpoint's architecture ({}) differs from the run's ({})", dir.string(),
           info.architecture.summary(), inputs_.model->architecture().summary());
  model::load_weights(*inputs_.model, run::load_weights_file(run::CheckpointFolder{dir}.weights()),
                      run::CheckpointFolder{dir}.weights().string());
  if (extension_) extension_->load(dir);
  run::load_optimizer(*optimizer_, dir);
  run::load_rng_state(run::CheckpointFolder{dir}.rng());
  state_ = info.state;
  check_batch_position(info);
  // Events logged after this checkpoint belong to the interrupted session: drop them.
  for (const auto& log_name : event_logs()) {
    const fs::path log_file = options_.run_dir / log_name;
    std::error_code ec;
    if (options_.rank != 0 || !fs::exists(log_file, ec)) continue;
    run::trim_jsonl(log_file, [&](const nlohmann::json& j) {
      // (The end-of-run records are written again when the resumed run ends.)
      const bool final = j.value("event", "") == "final" || j.value("final", false);
      return j.value("step", int64_t{0}) <= state_.step && !final;
    });
  }
}

std::vector<std::string> Trainer::event_logs() const {
  std::vector<std::string> logs = {run::RunFolder::kMetrics};
  if (extension_) {
    for (auto& l : extension_->event_logs()) logs.push_back(l);
  }
  return logs;
}

namespace {
// The step a checkpoint folder holds; -1 when it is missing or unreadable.
int64_t checkpoint_step(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(run::CheckpointFolder{dir}.state(), ec)) return -1;
  try {
    return nlohmann::json::parse(io::read_file(run::CheckpointFolder{dir}.state()))
        .at("step")
        .get<int64_t>();
  } catch (const std::exception&) {
    return -1;
  }
}
}  // namespace

void Trainer::sync_checkpoint_set(bool evaluated) {
  if (options_.rank != 0) return;
  const run::RunFolder f = folder();
  const fs::path last = f.last();
  if (state_.best_step == state_.step && checkpoint_step(f.best()) != state_.step) {
    run::copy_checkpoint(last, f.best());
    io::crash_point("train.saved_best");
  }
  const int keep = config_.train.keep_last;
  if (!evaluated || keep <= 0) return;
  const fs::path named = f.step_checkpoint(state_.step);
  if (checkpoint_step(named) != state_.step) {
    run::copy_checkpoint(last, named);
    io::crash_point("train.saved_step");
  }
  auto steps = f.checkpoint_steps();
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i)
    fs::remove_all(f.step_checkpoint(steps[i]));
}

EvalResult Trainer::evaluate() {
  init();
  return evaluate_dev(inputs_.model, inputs_, config_, extension_.get());
}

// The progress line and the "train" records of metrics.jsonl, over a window of steps.
class Trainer::Progress {
 public:
  explicit Progress(double elapsed_before) : elapsed_before_(elapsed_before) {}
  // Training time over all sessions of the run.
  double elapsed() const { return elapsed_before_ + since(session_start_); }
  bool tty() const { return tty_; }
  bool window_empty() const { return steps_ == 0; }
  void add(const StepStats& s) {
    loss_ += s.loss;
    nll_ += s.nll;
    tokens_ += s.tokens;
    ++steps_;
  }
  // Shows the progress line (rewritten in place after every step on a terminal, a log line every
  // train.log_every steps otherwise); at a log step returns the window's record and starts a new
  // window.
  std::optional<nlohmann::json> report(const run::TrainState& st, const TrainConfig& t, int64_t end,
                                       double lr, TrainingExtension* extension) {
    const bool log_now = st.step % t.log_every == 0;
    if (!log_now && !tty_) return std::nullopt;
    const double secs = since(window_start_);
    const double rate = tokens_ / std::max(secs, 1e-9);
    const double steps_per_s = steps_ / std::max(secs, 1e-9);
    const double eta = static_cast<double>(end - st.step) / std::max(steps_per_s, 1e-9);
    const double loss = loss_ / std::max<int64_t>(tokens_, 1);
    const double nll = nll_ / std::max<int64_t>(tokens_, 1);
    const std::string line =
        fmt::format(
            "step {}/{} | epoch {} | loss {:.3f} | nll {:.3f} | lr {:.2e} | {:.0f} tok/s | "
            "elapsed {} | ETA {}",
            st.step, end, st.epoch + 1, loss, nll, lr, rate, duration(elapsed()), duration(eta)) +
        (extension ? extension->progress() : "");
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      std::fflush(stderr);
    } else {
      log::info("{}", line);
    }
    if (!log_now) return std::nullopt;
    nlohmann::json rec = {{"event", "train"},
                          {"step", st.step},
                          {"epoch", st.epoch + 1},
                          {"loss", loss},
                          {"nll", nll},
                          {"lr", lr},
                          {"tgt_tokens_per_s", rate},
                          {"elapsed_s", elapsed()}};
    window_start_ = Clock::now();
    loss_ = nll_ = 0;
    tokens_ = steps_ = 0;
    return rec;
  }
  // Ends a progress line left open on a terminal.
  void end_line() const {
    if (tty_) std::fputc('\n', stderr);
  }

 private:
  const double elapsed_before_;
  const Clock::time_point session_start_ = Clock::now();
  const bool tty_ = log::stderr_is_tty();
  Clock::time_point window_start_ = Clock::now();
  double loss_ = 0, nll_ = 0;
  int64_t tokens_ = 0, steps_ = 0;
};

TrainSummary Trainer::run() {
  init();
  start_or_resume();
  log_run_start();
  broadcast_parameters();
  // SIGINT / SIGTERM: stop after this step, saving `last`; a second one stops at once.
  const StopSignals stop_signals(StopSignals::Options{.restart = true, .exit_on = 2});
  Progress progress(state_.elapsed_seconds);
  TrainSummary summary;
  last_saved_step_ = state_.step;
  inputs_.model->train();
  if (state_.step == 0 && state_.best_step < 0 && extension_ && extension_->evaluate_at_start())
    evaluate_and_checkpoint(progress);
  // A stop asked for during the start (the step-0 evaluation of a fine-tuning run) is honoured
  // before the first step. One process only: processes of a data-parallel run agree on a stop
  // through the step's all-reduce.
  if (!options_.comm && StopSignals::requested()) summary.interrupted = true;
  run_steps(summary, progress);
  progress.end_line();
  finish_run(summary, progress);
  summary.steps = state_.step;
  summary.best_score = state_.best_score;
  summary.best_step = state_.best_step;
  summary.seconds = state_.elapsed_seconds;
  // Over the whole run (all sessions): tokens trained on per second of training.
  summary.target_tokens_per_second =
      state_.elapsed_seconds > 0 ? state_.target_tokens / state_.elapsed_seconds : 0.0;
  return summary;
}

void Trainer::run_steps(TrainSummary& summary, Progress& progress) {
  const auto& t = config_.train;
  while (!summary.interrupted && state_.step < end_step() &&
         !(t.max_epochs > 0 && state_.epoch >= t.max_epochs)) {
    if (epoch_done()) {
      next_epoch();
      continue;
    }
    const StepStats s = train_step();
    if (s.tokens == 0) continue;  // no process had a batch
    progress.add(s);
    // The progress line counts to the latest end known now (a gate run's latest fixing point).
    const int64_t shown_end =
        extension_ ? std::min(end_step(), extension_->latest_end_step(t.max_steps)) : end_step();
    if (auto rec = progress.report(state_, t, shown_end, s.lr, extension_.get())) {
      if (options_.comm) {
        (*rec)["world_size"] = options_.world_size;
        (*rec)["allreduce_bytes_per_step"] = allreduce_bytes_;
      }
      log_metrics(*rec);
    }
    if (state_.step % t.eval_every == 0) {
      evaluate_and_checkpoint(progress);
      const bool may_stop = !extension_ || extension_->early_stopping();
      if (may_stop && t.patience > 0 && state_.evals_without_improvement >= t.patience) {
        log::info("early stop: no improvement in {} evaluations (best step {})", t.patience,
                  state_.best_step);
        summary.early_stopped = true;
        break;
      }
    }
    if (state_.step >= end_step()) break;
    // Between evaluations only `last`, so that a killed run loses little; saved right after a
    // log line (the log window is not part of the checkpoint), so that a resumed run logs the
    // same numbers as an uninterrupted one.
    if (t.save_every > 0 && state_.step - last_saved_step_ >= t.save_every &&
        progress.window_empty() && !s.stop)
      save_last(progress);
    if (s.stop) {
      summary.interrupted = true;
      break;
    }
  }
}

void Trainer::finish_run(TrainSummary& summary, Progress& progress) {
  const fs::path last = folder().last();
  if (summary.interrupted) {
    save_last(progress);
    log::info("interrupted at step {}: saved {}; run the same command to resume", state_.step,
              last.string());
    return;
  }
  std::error_code ec;
  if (state_.step != last_saved_step_ || !fs::exists(last, ec)) evaluate_and_checkpoint(progress);
  const int64_t differing = options_.comm ? check_parameters_identical() : 0;
  if (options_.rank == 0) {
    if (extension_) extension_->finish(*this);
    write_summary(summary, progress.elapsed(), differing);
  }
}

void Trainer::start_or_resume() {
  const run::RunFolder f = folder();
  fs::create_directories(f.checkpoints());
  std::error_code ec;
  if (fs::exists(f.last(), ec)) {
    resume_from(f.last());
    log::info("resuming {} from step {} (epoch {}, batch {} of {})", options_.run_dir.string(),
              state_.step, state_.epoch + 1, state_.batch_in_epoch, batches_.size());
    // Was `last` written by an evaluation? Its eval event is logged before the save.
    const bool evaluated =
        options_.rank == 0 && run::eval_record(f.metrics(), state_.step).has_value();
    if (options_.rank == 0) check_step_checkpoints();
    sync_checkpoint_set(evaluated);
    if (options_.rank == 0) check_best_checkpoint();
  } else if (options_.rank == 0) {
    for (const auto& log_name : event_logs())
      io::write_file_atomic(options_.run_dir / log_name, "");
  }
  if (options_.rank != 0) return;
  save_config(config_, f.config());
  fs::remove(f.summary(), ec);  // an extended run is not finished any more
}

void Trainer::log_run_start() {
  const int64_t n_params = model::parameter_count(*inputs_.model);
  int64_t epoch_tokens = 0;
  for (const auto& e : inputs_.train) epoch_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  log::info(
      "model: {} parameters, heads {} (enc/dec/enc-dec), {} {}; {} batches and {} target "
      "tokens per epoch; device {}",
      n_params, inputs_.model->architecture().summary(),
      config_.model.pre_norm ? "pre-norm" : "post-norm",
      config_.model.tie_embeddings ? "tied embeddings" : "untied embeddings", batches_.size(),
      epoch_tokens, inputs_.device.str());
}

void Trainer::broadcast_parameters() {
  if (!options_.comm) return;
  // Every rank starts from rank 0's parameters (they agree already: same seed or checkpoint).
  torch::NoGradGuard no_grad;
  for (auto& p : params_) options_.comm->broadcast(p, 0);
}

bool Trainer::epoch_done() const {
  return state_.batch_in_epoch >= static_cast<int64_t>(batches_.size());
}

void Trainer::next_epoch() {
  ++state_.epoch;
  state_.batch_in_epoch = 0;
}

Trainer::StepStats Trainer::train_step() {
  StepStats s;
  optimizer_->zero_grad();
  accumulate_batches(s);
  synchronise_stats(s);
  check_finite("training loss", s.loss);
  if (s.tokens > 0) apply_update(s);
  return s;
}

void Trainer::check_finite(const char* what, double value) const {
  // A diverged run: every later step, evaluation and checkpoint (`best` included) would hold
  // NaN weights. It stops before saving anything, its checkpoints as they were.
  HC_CHECK(std::isfinite(value),
           "step {}: the {} is {}: training diverged. The run stops with its checkpoints as they "
           "were; resume it with a lower train.lr (or a longer train.warmup_steps, or "
           "train.precision=fp32; train.* keys may change on resume), or start again",
           state_.step + 1, what, value);
}

void Trainer::accumulate_batches(StepStats& s) {
  if (order_epoch_ != state_.epoch) {
    order_ = data::epoch_order(static_cast<int64_t>(batches_.size()),
                               static_cast<uint64_t>(config_.seed), state_.epoch);
    order_epoch_ = state_.epoch;
  }
  const auto& t = config_.train;
  const int64_t n = static_cast<int64_t>(order_.size());
  // One optimizer step takes update_freq batches per process; process r takes the batches at
  // positions r, r + world, ... of the step's share of the epoch.
  const int64_t step_batches = static_cast<int64_t>(t.update_freq) * options_.world_size;
  const auto seed = static_cast<uint64_t>(config_.seed);
  // The step's noise (extension_->begin_step) is drawn from the generator seeded by the step's
  // first batch on every process, so all share it; the process that has that batch then goes on
  // to its dropout from the same stream (with update_freq 1 on one process: what seeding each
  // batch alone gives).
  const int64_t first = state_.batch_in_epoch;
  bool begun = extension_ == nullptr;
  for (int64_t k = 0; k < step_batches && state_.batch_in_epoch < n; ++k) {
    const int64_t pos = state_.batch_in_epoch++;
    if (pos % options_.world_size != options_.rank) continue;
    if (!begun && pos != first) {
      seed_batch(seed, state_.epoch, first);
      extension_->begin_step();
      begun = true;
    }
    // Dropout and per-batch noise are a function of (seed, epoch, batch): the same whatever the
    // number of processes, and across a resume.
    seed_batch(seed, state_.epoch, pos);
    if (!begun) {
      extension_->begin_step();
      begun = true;
    }
    const data::Batch b = data::collate(inputs_.train, batches_[order_[pos]], inputs_.device);
    if (extension_) extension_->before_forward(b);
    torch::Tensor logits;
    {
      PrecisionScope scope(inputs_.precision, inputs_.device);
      logits = inputs_.model->forward(b.src, b.tgt_in);
    }
    // Summed over the batch's target tokens: the gradients hold sums until apply_update.
    const auto ls = model::label_smoothed_loss(logits, b.tgt_out, t.label_smoothing);
    (extension_ ? extension_->batch_objective(b, logits, ls.loss, inputs_.precision) : ls.loss)
        .backward();
    s.tokens += ls.tokens;
    s.loss += ls.loss.item<double>();
    s.nll += ls.nll.item<double>();
  }
  s.stop = StopSignals::requested();
}

void Trainer::synchronise_stats(StepStats& s) {
  if (!options_.comm) return;
  // Token counts, loss sums and the stop request, summed over the processes.
  auto stats = torch::tensor({static_cast<double>(s.tokens), s.loss, s.nll, s.stop ? 1.0 : 0.0},
                             torch::kFloat64);
  std::vector<torch::Tensor> v = {stats};
  options_.comm->allreduce_sum(v);
  s.tokens = static_cast<int64_t>(stats[0].item<double>());
  s.loss = stats[1].item<double>();
  s.nll = stats[2].item<double>();
  s.stop = stats[3].item<double>() > 0;
  if (s.stop) StopSignals::request();
}

void Trainer::apply_update(StepStats& s) {
  const auto& t = config_.train;
  // The objective of a step: mean token cross-entropy + the extension's regulariser R(step). The
  // batches left the gradient of the summed cross-entropy; R is added with weight `tokens` (each
  // process its share, so that the sum over processes is R x all tokens), and everything is
  // divided by the step's token count after the all-reduce.
  Regulariser r;
  if (extension_) r = extension_->regulariser(state_.step);
  if (r.term.defined()) (r.term * (static_cast<double>(s.tokens) / options_.world_size)).backward();
  if (options_.comm) allreduce_bytes_ = dist::allreduce_gradients(*options_.comm, params_);
  for (auto& p : params_) {
    if (p.grad().defined()) p.grad().div_(static_cast<double>(s.tokens));
  }
  if (t.clip_norm > 0) torch::nn::utils::clip_grad_norm_(clip_params_, t.clip_norm);
  const int64_t start = extension_ ? extension_->schedule_start() : 0;
  s.lr = scheduled_lr(t.lr_schedule, state_.step + 1 - start, t.lr, t.warmup_steps,
                      t.warmup_init_lr, end_step() - start);
  set_group_rates(*optimizer_, groups_, s.lr);
  optimizer_->step();
  if (extension_) {
    extension_->after_step(state_.step, r);
    if (extension_->take_optimizer_reset()) optimizer_->state().clear();
  }
  ++state_.step;
  state_.target_tokens += s.tokens;
}

void Trainer::evaluate_and_checkpoint(Progress& progress) {
  const auto r = evaluate();
  check_finite("dev loss", r.loss);
  const double score = config_.train.best_metric == BestMetric::kBleu ? r.bleu : -r.loss;
  const bool improved = state_.best_step < 0 || score > state_.best_score;
  if (improved) {
    state_.best_score = score;
    state_.best_step = state_.step;
    state_.evals_without_improvement = 0;
  } else {
    ++state_.evals_without_improvement;
  }
  state_.elapsed_seconds = progress.elapsed();
  nlohmann::json rec = {{"event", "eval"},
                        {"step", state_.step},
                        {"epoch", state_.epoch + 1},
                        {"dev_loss", r.loss},
                        {"dev_nll", r.nll},
                        {"dev_ppl", std::exp(r.nll)},
                        {"dev_bleu", r.bleu},
                        {"dev_chrf", r.chrf},
                        {"dev_sentences", r.sentences},
                        {"best_step", state_.best_step},
                        {"elapsed_s", state_.elapsed_seconds}};
  if (extension_) extension_->evaluation_extras(state_.step, rec);
  log_metrics(rec);
  progress.end_line();
  log::info("step {} | dev loss {:.3f} ppl {:.2f} | dev BLEU {:.2f} chrF {:.2f}{} | best step {}",
            state_.step, r.loss, std::exp(r.nll), r.bleu, r.chrf, improved ? " (best)" : "",
            state_.best_step);
  save(folder().last());
  io::crash_point("train.saved_last");
  sync_checkpoint_set(true);
  last_saved_step_ = state_.step;
}

void Trainer::save_last(Progress& progress) {
  state_.elapsed_seconds = progress.elapsed();
  save(folder().last());
  last_saved_step_ = state_.step;
}

int64_t Trainer::end_step() const {
  const int64_t max = config_.train.max_steps;
  return extension_ ? std::min(max, extension_->end_step(max)) : max;
}

int64_t Trainer::check_parameters_identical() {
  // Data-parallel runs end by checking that every process holds rank 0's parameters.
  torch::NoGradGuard no_grad;
  int64_t differing = 0;
  for (auto& p : params_) {
    auto mine = p.detach().clone();
    auto theirs = p.detach().clone();
    options_.comm->broadcast(theirs, 0);
    differing += mine.ne(theirs).sum().item<int64_t>();
  }
  auto count = torch::tensor({static_cast<double>(differing)}, torch::kFloat64);
  std::vector<torch::Tensor> v = {count};
  options_.comm->allreduce_sum(v);
  differing = static_cast<int64_t>(count.item<double>());
  if (differing == 0) {
    log::info("parameters identical on all {} processes", options_.world_size);
  } else {
    log::warn("{} parameter values differ between the processes", differing);
  }
  return differing;
}

void Trainer::write_summary(const TrainSummary& summary, double seconds, int64_t differing) {
  // Written last: its presence means the run is complete (sweeps skip such runs).
  const auto& t = config_.train;
  run::RunSummary done;
  done.status = summary.early_stopped ? "early-stopped" : "finished";
  done.steps = state_.step;
  done.best_step = state_.best_step;
  done.best_metric = std::string(choice_name(t.best_metric));
  done.best_score = t.best_metric == BestMetric::kBleu ? state_.best_score : -state_.best_score;
  done.precision = inputs_.precision.name();
  done.precision_reason = inputs_.precision.reason;
  done.train_seconds = seconds;
  done.target_tokens_per_s = seconds > 0 ? state_.target_tokens / seconds : 0.0;
  if (options_.comm) {
    done.world_size = options_.world_size;
    done.parameters_identical_across_processes = differing == 0;
  }
  io::crash_point("train.before_summary");
  run::write_summary(folder(), done);
}

bool resume_may_change(const std::string& key) {
  // train.best_metric is the scale of the recorded best score (BLEU, or minus the loss): a resume
  // under the other one would compare scores of two kinds.
  return (key.rfind("train.", 0) == 0 && key != "train.best_metric") ||
         key.rfind("threads.", 0) == 0 || key.rfind("decode.", 0) == 0 || key == "device";
}

io::RunLock check_run_folder(const Config& config, const fs::path& run_dir, int rank) {
  std::error_code ec;
  HC_CHECK(!fs::exists(run_dir, ec) || fs::is_directory(run_dir, ec),
           "--out {}: exists and is not a folder", run_dir.string());
  const bool existed = fs::exists(run_dir, ec) && !fs::is_empty(run_dir, ec);
  const run::RunFolder f{run_dir};
  io::RunLock lock;
  if (rank == 0) {
    lock = io::RunLock::acquire(run_dir);
    int removed =
        io::remove_stale_temporaries(run_dir) + io::remove_stale_temporaries(f.checkpoints());
    if (removed > 0)
      log::info("removed {} temporary folder(s) left by an interrupted process in {}", removed,
                run_dir.string());
  }
  const fs::path saved = f.config();
  const bool has_checkpoint = fs::exists(f.last(), ec);
  if (!has_checkpoint && existed) {
    // A folder with content but no checkpoint: only a run interrupted before its first
    // checkpoint (its event logs, then its config, alone) may be started again.
    for (const auto& e : fs::directory_iterator(run_dir)) {
      const auto name = e.path().filename().string();
      // (log.txt and sweep-exit.json: what a sweep keeps beside the run it started)
      HC_CHECK(run::RunFolder::is_early_run_file(name),
               "{} exists and holds '{}', but no checkpoint to resume: refusing to overwrite it; "
               "use another --out",
               run_dir.string(), name);
    }
    // A run writes its event log before its config.yaml: a config.yaml alone is the user's.
    HC_CHECK(!fs::exists(saved, ec) || fs::exists(f.metrics(), ec),
             "{} holds a config.yaml but no run (no metrics.jsonl, no checkpoint): refusing to "
             "overwrite it; give the run another --out",
             run_dir.string());
  }
  if (!has_checkpoint || !fs::exists(saved, ec)) {
    lock.keep_file();  // the folder is (or becomes) this run's
    return lock;
  }
  const Config before = load_config_file(saved);
  std::vector<std::string> blocking;
  for (const auto& key : changed_keys(before, config)) {
    if (resume_may_change(key)) {
      log::info("resuming with {} changed: {} -> {}", key, config_value(before, key),
                config_value(config, key));
    } else {
      blocking.push_back(fmt::format("{} ({} in the run, {} now)", key, config_value(before, key),
                                     config_value(config, key)));
    }
  }
  HC_CHECK(blocking.empty(),
           "{} holds a run with another config: {}. Use another --out, or the run's own config "
           "({})",
           run_dir.string(), fmt::join(blocking, ", "), saved.string());
  lock.keep_file();
  return lock;
}

TrainSummary train_command(const Config& config, const TrainOptions& options) {
  const auto lock = check_run_folder(config, options.run_dir, options.rank);
  fs::create_directories(options.run_dir);
  Trainer trainer(config, options);
  const auto s = trainer.run();
  log::info("{} at step {}: best dev {} {:.2f} at step {}; {} of training, {:.0f} target tokens/s",
            s.interrupted     ? "stopped"
            : s.early_stopped ? "early-stopped"
                              : "finished",
            s.steps, choice_name(config.train.best_metric),
            config.train.best_metric == BestMetric::kBleu ? s.best_score : -s.best_score,
            s.best_step, duration(s.seconds), s.target_tokens_per_second);
  return s;
}

}  // namespace headcount::train
