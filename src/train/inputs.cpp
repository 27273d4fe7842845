#include "headcount/train/inputs.h"

#include <limits>

#include "headcount/common/check.h"
#include "headcount/common/log.h"
#include "headcount/common/runtime.h"
#include "headcount/decode/search.h"
#include "headcount/decode/translate.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"
#include "headcount/model/loss.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/checkpoint_files.h"

namespace headcount::train {
namespace {

// Device, precisions and threads, logged; LibTorch seeded.
void set_up_runtime(const Config& config, const TrainOptions& options, TrainingInputs& in) {
  in.device = options.device ? *options.device : runtime::resolve_device(config.device);
  in.precision = resolve_precision(config.train.precision, in.device, "train.precision");
  // The dev evaluations decode in decode.precision: refuse an impossible one now, not after the
  // first evaluation interval.
  const auto decode_precision =
      resolve_precision(config.decode.precision, in.device, "decode.precision");
  runtime::apply_threads(config.threads, in.precision.bf16());
  log::info("precision: {} ({}); {} LibTorch thread(s); dev decoding in {}", in.precision.name(),
            in.precision.reason, at::get_num_threads(), decode_precision.name());
  if (const std::string note = runtime::blas_kernel_note(); !note.empty())
    log::info("BLAS: {}", note);
  torch::manual_seed(static_cast<uint64_t>(config.seed));
}

// The vocabulary the weights were trained with (fine-tuning), or one trained or found in the
// cache for this corpus.
void load_vocab(const Config& config, const std::optional<run::CheckpointInfo>& start,
                TrainingInputs& in) {
  if (start) {
    in.vocab_files = start->vocab;
  } else {
    in.vocab_files = data::train_or_load_vocab(
        config.vocab, data_path(config.data, config.data.train_src),
        data_path(config.data, config.data.train_tgt), config.seed, runtime::num_cores());
  }
  in.src_vocab = std::make_unique<data::Vocab>(data::Vocab::load(in.vocab_files.src_model));
  in.tgt_vocab = std::make_unique<data::Vocab>(data::Vocab::load(in.vocab_files.tgt_model));
}

void encode_examples(const Config& config, TrainingInputs& in) {
  size_t dropped = 0;
  in.train = data::encode_pairs(in.corpus.train, *in.src_vocab, *in.tgt_vocab, config.train.max_len,
                                &dropped);
  HC_CHECK(!in.train.empty(), "no training pair is within train.max_len ({}) subwords",
           config.train.max_len);
  if (dropped)
    log::info("dropped {} training pairs longer than {} subwords", dropped, config.train.max_len);
  in.dev = data::encode_pairs(in.corpus.dev, *in.src_vocab, *in.tgt_vocab,
                              std::numeric_limits<int>::max());
  // Dev pairs are not length-filtered: one the model cannot hold is an error now, naming its
  // line, rather than at the first evaluation after an interval of training.
  const int positions = config.model.max_positions;
  for (const auto& e : in.dev) {
    for (const bool source : {true, false}) {
      const size_t length = (source ? e.src.size() : e.tgt.size()) + 1;  // + </s> (or <s>)
      HC_CHECK(length <= static_cast<size_t>(positions),
               "{}:{}: this dev sentence is {} subwords long with its end token, more than "
               "model.max_positions ({}) holds: shorten or remove the line (in both dev files), or "
               "raise model.max_positions",
               data_path(config.data, source ? config.data.dev_src : config.data.dev_tgt).string(),
               e.id + 1, length, positions);
    }
  }
}

// The model: the config's uniform architecture, options.architecture_from's (from scratch), or
// the fine-tuned checkpoint's with its weights.
model::Transformer build_model(const Config& config, const TrainOptions& options,
                               const std::optional<run::CheckpointInfo>& start,
                               const TrainingInputs& in) {
  model::Architecture arch = model::Architecture::uniform(config.model);
  if (options.architecture_from) {
    arch = run::read_architecture(*options.architecture_from);
    arch.check_against(config.model);
    log::info("architecture from {}: {} heads (enc/dec/enc-dec), trained from scratch",
              options.architecture_from->string(), arch.summary());
  }
  if (start) {
    arch = start->architecture;
    arch.check_against(config.model);
    const auto changed = changed_keys(start->config, config);
    for (const auto& key : changed) {
      HC_CHECK(key.rfind("model.", 0) != 0 || key.find("dropout") != std::string::npos,
               "{} was trained with {} = {}, the config says {}: the model must match",
               options.init_from->string(), key, config_value(start->config, key),
               config_value(config, key));
    }
  }
  auto model = model::Transformer(config.model, arch, in.src_vocab->size(), in.tgt_vocab->size());
  if (start) {
    model::load_weights(*model, run::load_weights_file(run::CheckpointFolder{start->dir}.weights()),
                        run::CheckpointFolder{start->dir}.weights().string());
    log::info("initialised from {} (step {}, heads {})", start->dir.string(), start->state.step,
              arch.summary());
  }
  model->to(in.device);
  return model;
}

// Teacher-forced loss and NLL per target token over the whole dev set.
void dev_loss(model::Transformer& model, const TrainingInputs& in, const Config& config,
              EvalResult& r) {
  double loss = 0, nll = 0;
  int64_t tokens = 0;
  // Dev pairs are not length-filtered: the batch budget must hold the longest one.
  size_t longest = 0;
  for (const auto& e : in.dev) longest = std::max({longest, e.src.size() + 1, e.tgt.size() + 1});
  const int64_t budget =
      std::max<int64_t>({config.train.max_tokens, 1024, static_cast<int64_t>(longest)});
  for (const auto& idx : data::make_batches(in.dev, budget, 1)) {
    const data::Batch b = data::collate(in.dev, idx, in.device);
    torch::Tensor logits;
    {
      PrecisionScope scope(in.precision, in.device);
      logits = model->forward(b.src, b.tgt_in);
    }
    const auto ls = model::label_smoothed_loss(logits, b.tgt_out, config.train.label_smoothing);
    loss += ls.loss.item<double>();
    nll += ls.nll.item<double>();
    tokens += ls.tokens;
  }
  r.loss = loss / std::max<int64_t>(tokens, 1);
  r.nll = nll / std::max<int64_t>(tokens, 1);
}

// BLEU and chrF of decoded dev sentences against the raw references.
void dev_scores(model::Transformer& model, const TrainingInputs& in, const Config& config,
                EvalResult& r) {
  size_t n = in.dev.size();
  if (config.train.eval_max_sentences > 0) n = std::min<size_t>(n, config.train.eval_max_sentences);
  std::vector<std::vector<int>> sources;
  std::vector<std::string> refs;
  for (size_t i = 0; i < n; ++i) {
    sources.push_back(in.dev[i].src);
    refs.push_back(in.corpus.dev.tgt[in.dev[i].id]);
  }
  auto options = decode::SearchOptions::from(config.decode);
  options.beam = config.train.eval_beam;
  const auto tr = decode::translate_and_score(model, *in.tgt_vocab, sources, options,
                                              config.decode.batch_size, in.device, {refs});
  const eval::ReferenceScores& s = tr.scores.at(0);
  r.bleu = *s.bleu;
  r.bleu_signature = s.bleu_signature;
  r.chrf = *s.chrf;
  r.sentences = static_cast<int64_t>(n);
}

}  // namespace

TrainingInputs load_training_inputs(const Config& config, const TrainOptions& options) {
  TrainingInputs in;
  set_up_runtime(config, options, in);
  in.corpus = data::load_corpus(config.data);
  log::info("data: {} training pairs ({}), {} dev", in.corpus.train.size(),
            in.corpus.train_filter.summary(), in.corpus.dev.size());
  std::optional<run::CheckpointInfo> start;
  if (options.init_from) {
    run::require_ungated(*options.init_from, "starting from its model alone");
    start = run::read_checkpoint_info(*options.init_from);
  }
  load_vocab(config, start, in);
  encode_examples(config, in);
  in.model = build_model(config, options, start, in);
  return in;
}

EvalResult evaluate_dev(model::Transformer& model, const TrainingInputs& inputs,
                        const Config& config, TrainingExtension* extension) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  if (extension) extension->begin_evaluation();
  EvalResult r;
  dev_loss(model, inputs, config, r);
  dev_scores(model, inputs, config, r);
  if (extension) extension->end_evaluation();
  if (was_training) model->train();
  return r;
}

}  // namespace headcount::train
