// Checkpoints: one folder each, written under a temporary name and swapped into place, never half
// written. Contents:
//   model.pt         weights, a pickled dict name -> tensor (Python: torch.load("model.pt"))
//   optimizer.pt     optimizer state (LibTorch archive)          [training checkpoints only]
//   rng.pt           random generator states (pickled dict)      [training checkpoints only]
//   state.json       step, epoch, position in the data, best score, timing
//   architecture.json  heads per layer and attention type, head width
//   config.yaml      the resolved config of the run
//   vocab/           the SentencePiece model(s) the checkpoint needs
//   meta.json        format version, headcount version, and the XXH64 of every other file
//                    ("files_xxh64"; checked whenever a file is read: LibTorch's zip reader does
//                    not check its CRCs, so damaged weights would otherwise load), the
//                    vocabulary's FNV-1a ("vocab_fnv1a") and the training corpus the run started
//                    from ("corpus_xxh64": train_src, train_tgt, dev_src, dev_tgt). Older
//                    checkpoints (the committed reference weights) record no file hashes and load
//                    unchecked.
#pragma once

#include <torch/optim/optimizer.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/common/config.h"
#include "headcount/data/vocab.h"
#include "headcount/model/architecture.h"
#include "headcount/model/transformer.h"

namespace headcount::run {

namespace fs = std::filesystem;

struct TrainState {
  int64_t step = 0;            // optimizer updates done
  int64_t epoch = 0;           // epoch in progress (0-based)
  int64_t batch_in_epoch = 0;  // next position in this epoch's batch order
  double best_score = 0;       // best dev score so far (BLEU, or -loss)
  int64_t best_step = -1;      // -1: no evaluation yet
  int64_t evals_without_improvement = 0;
  double elapsed_seconds = 0;  // training time, over all sessions
  int64_t target_tokens = 0;   // target tokens trained on
  nlohmann::json to_json() const;
  // Reads and checks every field (present, of its type, in range: step >= 0, -1 <= best_step <=
  // step, ...); errors name `file` and the field.
  static TrainState from_json(const nlohmann::json& j, const std::string& file = "state.json");
};

struct CheckpointInfo {
  fs::path dir;
  Config config;
  model::Architecture architecture;
  TrainState state;
  data::VocabFiles vocab;  // inside dir/vocab
  int64_t src_vocab_size = 0, tgt_vocab_size = 0;
  // What meta.json recorded (empty in older checkpoints): vocab/NAME -> FNV-1a, and the training
  // files the run started from ("train_src", "train_tgt") -> XXH64.
  std::map<std::string, std::string> vocab_fnv1a, corpus_xxh64;
};

// Writes a checkpoint folder atomically (replacing an existing one in one step).
// `extra` may add files to the folder before it is swapped into place; meta.json, written last,
// records the hash of every file. `corpus_xxh64`: the training and dev files the run started from.
void save_checkpoint(const fs::path& dir, model::Transformer& model,
                     torch::optim::Optimizer* optimizer, const TrainState& state,
                     const Config& config, const data::VocabFiles& vocab,
                     const std::function<void(const fs::path&)>& extra = {},
                     const std::map<std::string, std::string>& corpus_xxh64 = {});
// Reads everything but the tensors, checking each file read against meta.json's hashes and
// state.json against the folder it sits in (checkpoints/step-N holds step N, checkpoints/best
// its best step); errors name the file and what is wrong.
CheckpointInfo read_checkpoint_info(const fs::path& dir);
// The bytes of `name` (a path relative to checkpoint `dir`, such as "model.pt"), checked against
// the XXH64 meta.json recorded for it: a damaged file is an error naming it, the recorded and the
// found hash. Unchecked (a debug note) in a checkpoint that records no hashes.
std::string read_checkpoint_file(const fs::path& dir, const std::string& name);
// The architecture of a checkpoint folder, of any folder holding an architecture.json (a run's
// committed records), or of an architecture.json file itself: what retraining from scratch needs.
model::Architecture read_architecture(const fs::path& path);
// A model built from a checkpoint, with its weights, on `device`.
model::Transformer load_model(const CheckpointInfo& info, const torch::Device& device);
void load_optimizer(torch::optim::Optimizer& optimizer, const fs::path& dir);
void save_rng_state(const fs::path& file);
void load_rng_state(const fs::path& file);

// Weights as a pickled dict (what Python's torch.load reads), and back. A weights file inside a
// checkpoint is checked against the checkpoint's recorded hash.
void save_weights(const fs::path& file,
                  const std::vector<std::pair<std::string, torch::Tensor>>& weights);
std::vector<std::pair<std::string, torch::Tensor>> load_weights_file(const fs::path& file);

// Copies a checkpoint folder (hard links where possible) atomically to `dst`.
void copy_checkpoint(const fs::path& src, const fs::path& dst);

// Replaces `dst` with the folder `tmp` in one step (renameat2 RENAME_EXCHANGE), then removes the
// old contents. Readers see either the old or the new folder, never a mixture.
void replace_directory(const fs::path& tmp, const fs::path& dst);

}  // namespace headcount::run
