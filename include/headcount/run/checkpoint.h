// Checkpoints: one folder each, written under a temporary name and swapped into place, never half
// written. Contents:
//   model.pt         weights, a pickled dict name -> tensor (Python: torch.load("model.pt"))
//   optimizer.pt     optimizer state (LibTorch archive)          [training checkpoints only]
//   rng.pt           random generator states (pickled dict)      [training checkpoints only]
//   state.json       step, epoch, position in the data, best score, timing
//   architecture.json  heads per layer and attention type, head width
//   config.yaml      the resolved config of the run
//   vocab/           the SentencePiece model(s) the checkpoint needs
//   meta.json        format version, headcount version
#pragma once

#include <torch/optim/optimizer.h>

#include <filesystem>
#include <functional>
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
  static TrainState from_json(const nlohmann::json& j);
};

struct CheckpointInfo {
  fs::path dir;
  Config config;
  model::Architecture architecture;
  TrainState state;
  data::VocabFiles vocab;  // inside dir/vocab
  int64_t src_vocab_size = 0, tgt_vocab_size = 0;
};

// Writes a checkpoint folder atomically (replacing an existing one in one step).
// `extra` may add files to the folder before it is swapped into place.
void save_checkpoint(const fs::path& dir, model::Transformer& model,
                     torch::optim::Optimizer* optimizer, const TrainState& state,
                     const Config& config, const data::VocabFiles& vocab,
                     const std::function<void(const fs::path&)>& extra = {});
// Reads everything but the tensors; errors name the folder and what is wrong.
CheckpointInfo read_checkpoint_info(const fs::path& dir);
// The architecture of a checkpoint folder, of any folder holding an architecture.json (a run's
// committed records), or of an architecture.json file itself: what retraining from scratch needs.
model::Architecture read_architecture(const fs::path& path);
// A model built from a checkpoint, with its weights, on `device`.
model::Transformer load_model(const CheckpointInfo& info, const torch::Device& device);
void load_optimizer(torch::optim::Optimizer& optimizer, const fs::path& dir);
void save_rng_state(const fs::path& file);
void load_rng_state(const fs::path& file);

// Weights as a pickled dict (what Python's torch.load reads), and back.
void save_weights(const fs::path& file,
                  const std::vector<std::pair<std::string, torch::Tensor>>& weights);
std::vector<std::pair<std::string, torch::Tensor>> load_weights_file(const fs::path& file);

// Copies a checkpoint folder (hard links where possible) atomically to `dst`.
void copy_checkpoint(const fs::path& src, const fs::path& dst);

// Replaces `dst` with the folder `tmp` in one step (renameat2 RENAME_EXCHANGE), then removes the
// old contents. Readers see either the old or the new folder, never a mixture.
void replace_directory(const fs::path& tmp, const fs::path& dst);

}  // namespace headcount::run
