// The files of a checkpoint folder, by name (what each holds: run/checkpoint.h). No code outside
// run/ spells them: it asks CheckpointFolder.
#pragma once

#include <filesystem>
#include <string>

namespace headcount::run {

struct CheckpointFolder {
  std::filesystem::path dir;

  std::filesystem::path weights() const { return dir / kWeights; }
  std::filesystem::path optimizer() const { return dir / "optimizer.pt"; }
  std::filesystem::path rng() const { return dir / "rng.pt"; }
  std::filesystem::path state() const { return dir / kState; }
  std::filesystem::path meta() const { return dir / "meta.json"; }
  std::filesystem::path architecture() const { return dir / kArchitecture; }
  std::filesystem::path config() const { return dir / "config.yaml"; }
  std::filesystem::path vocab(const std::string& name) const { return dir / "vocab" / name; }
  // A prune run's own files in each of its checkpoints (prune::L0Pruning's save and load).
  std::filesystem::path gates() const { return dir / kGates; }
  std::filesystem::path prune_state() const { return dir / kPruneState; }
  // Whether the folder holds a model's weights (a pruned/ folder an interrupted run left empty
  // does not).
  bool has_weights() const {
    std::error_code ec;
    return std::filesystem::exists(weights(), ec);
  }

  // Names, for run::read_checkpoint_file(dir, name) and records that list a checkpoint's files.
  static constexpr const char* kWeights = "model.pt";
  static constexpr const char* kState = "state.json";
  static constexpr const char* kArchitecture = "architecture.json";
  static constexpr const char* kGates = "gates.pt";
  static constexpr const char* kPruneState = "prune_state.json";
};

}  // namespace headcount::run

namespace headcount::run {

// Why `path` cannot be a checkpoint folder, or "": a file given for its folder (the message says
// which folder to pass). Both the checkpoint reader and the command line's early check use it.
std::string checkpoint_folder_problem(const std::filesystem::path& path);

// A checkpoint of a prune run in training holds its gates beside the model (gates.pt): the model
// alone is not what the run evaluated (its gates scale the heads). An error naming the checkpoint
// and what to use instead, for the commands that would read the model alone (`what`).
void require_ungated(const std::filesystem::path& dir, const std::string& what);

}  // namespace headcount::run
