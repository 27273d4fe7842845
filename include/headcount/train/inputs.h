// What a run loads before it trains or prunes: the device and precision, the corpus, the
// vocabulary, the encoded training and dev examples, and the model (random, or a checkpoint's
// weights). The Trainer and the post-training methods (Fisher) load it through the same call, so
// both see the same sentences, token ids and weights, and log the same lines.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/common/precision.h"
#include "headcount/data/batching.h"
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"
#include "headcount/dist/distributed.h"
#include "headcount/model/transformer.h"
#include "headcount/train/extension.h"

namespace headcount::train {

namespace fs = std::filesystem;

struct TrainOptions {
  fs::path run_dir;
  // Train this checkpoint's architecture (e.g. a pruned one) from a random initialisation.
  std::optional<fs::path> architecture_from;
  // Start from this checkpoint's weights, architecture and vocabulary (fine-tuning).
  std::optional<fs::path> init_from;
  int rank = 0;        // this process
  int world_size = 1;  // processes
  // Data-parallel training: gradients are summed across the group before each optimizer step
  // (null: one process).
  std::shared_ptr<dist::Communicator> comm;
  // This process's device where it is not the config's `device` alone: a data-parallel process on
  // CUDA trains on its own GPU (dist::process_device). Unset: runtime::resolve_device(device).
  std::optional<torch::Device> device;
};

struct EvalResult {
  double loss = 0, nll = 0;  // per target token
  double bleu = 0, chrf = 0;
  int64_t sentences = 0;
  std::string bleu_signature;
};

struct TrainingInputs {
  torch::Device device{torch::kCPU};
  PrecisionChoice precision;  // train.precision resolved for device
  data::Corpus corpus;
  data::VocabFiles vocab_files;
  std::unique_ptr<data::Vocab> src_vocab, tgt_vocab;
  std::vector<data::Example> train;   // length-filtered by train.max_len
  std::vector<data::Example> dev;     // not filtered: every one fits model.max_positions
  model::Transformer model{nullptr};  // on device
};

// Resolves the device and precisions, applies the thread settings, seeds LibTorch, loads the
// corpus, trains or loads the vocabulary (options.init_from's, when set), encodes the pairs and
// builds the model: options.architecture_from's architecture from scratch, or options.init_from's
// architecture and weights. Errors name the dev line too long for the model and the model key a
// fine-tuning config changed.
TrainingInputs load_training_inputs(const Config& config, const TrainOptions& options);

// Dev loss (teacher-forced, whole dev set, in train.precision), BLEU and chrF (decoded,
// train.eval_max_sentences) of `model`; `extension` (may be null) brackets the evaluation.
EvalResult evaluate_dev(model::Transformer& model, const TrainingInputs& inputs,
                        const Config& config, TrainingExtension* extension = nullptr);

}  // namespace headcount::train
