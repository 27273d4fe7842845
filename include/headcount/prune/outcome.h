// The outcome of a prune run, L0 (L0Pruning::finish) or Fisher (fisher_prune_command): one record
// type for RUN/pruning.json and RUN/README.md, written by write_prune_outcome and read back by
// read_prune_outcome.
//
// The two methods still write different key sets (kept as they were; to be unified): both write
// init_from, attention_gated, lambda, target_heads, steps, heads_before_e_d_de,
// heads_after_e_d_de, heads_after, parameters_before, parameters_after, dev_bleu_start,
// dev_bleu_end and pruned_checkpoint; L0 adds heads_open_by_gates; Fisher adds method, budget,
// decode_flops_fraction and the FisherDetails fields. The keys are written in that fixed order
// (optional ones only when set).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/model/architecture.h"
#include "headcount/run/run_folder.h"

namespace headcount::prune {

namespace fs = std::filesystem;

// Fisher: seconds of each stage (pruning: calibration to the saved checkpoint; dev evaluations
// are not part of it).
struct FisherSeconds {
  double pruning = 0, calibration = 0, search = 0, rearrange = 0, reconstruct = 0, save = 0;
  double dev_evaluations = 0;
};

// Fisher: how well one refit attention layer reproduces its target on the calibration tokens
// (the non-padding query positions): squared errors summed over the tokens and the model width,
// before the refit (the kept heads through the layer's old W_o and bias) and after it.
struct LayerRefit {
  std::string layer;  // "enc_self.0"
  int64_t heads_kept = 0, heads = 0;
  int64_t tokens = 0;
  double target_sq = 0;  // the target's sum of squares
  double error_before = 0, error_after = 0;
  double relative_before() const { return target_sq > 0 ? error_before / target_sq : 0; }
  double relative_after() const { return target_sq > 0 ? error_after / target_sq : 0; }
};

// Fisher: what the calibration, the search and the reconstruction did.
struct FisherDetails {
  int64_t calibration_sentences = 0;
  int64_t calibration_target_tokens = 0;
  double removed_diagonal_fisher = 0;  // summed over the removed heads
  bool rearrange = false;
  int64_t layers_rearranged = 0;
  bool reconstruct = false;
  std::string reconstruct_mode;  // prune.reconstruct_mode, "off" without reconstruction
  double ridge = 0;
  int64_t layers_refit = 0;
  std::vector<LayerRefit> refits;  // one per refit layer (empty in records older than it)
  FisherSeconds seconds;
};

struct PruneOutcome {
  std::optional<std::string> method;  // Fisher: "fisher" (L0 runs write no method)
  std::string init_from;              // the converged checkpoint pruned
  std::vector<std::string> attention_gated;
  double lambda = 0;                             // L0's lambda (0 in target mode and for Fisher)
  int64_t target_heads = 0;                      // target mode: the heads kept in all
  std::vector<int64_t> target_heads_per_type;    // L0 with prune.target_heads_per_type (e, d, de)
  int64_t steps = 0;                             // fine-tuning steps (Fisher: 0)
  std::optional<nlohmann::ordered_json> budget;  // Fisher: the budget and its costs
  std::string heads_before, heads_after;         // "e/d/de" head counts
  model::Architecture architecture_after;        // "heads_after"
  std::optional<int64_t> heads_open_by_gates;    // L0
  int64_t parameters_before = 0, parameters_after = 0;
  std::optional<double> decode_flops_fraction;  // Fisher: after / before
  double dev_bleu_start = 0, dev_bleu_end = 0;
  std::optional<FisherDetails> fisher;
  std::string pruned_checkpoint;

  nlohmann::ordered_json to_json() const;
  // Errors name `file` and the key missing or of another type.
  static PruneOutcome from_json(const nlohmann::ordered_json& j,
                                const std::string& file = "pruning.json");
};

// README.md: the outcome as a table, then the first lines of head_removal.csv (`head_removal`).
std::string prune_readme(const PruneOutcome& outcome, const std::string& head_removal);

// Writes pruning.json, then README.md.
void write_prune_outcome(const run::RunFolder& folder, const PruneOutcome& outcome,
                         const std::string& head_removal);
PruneOutcome read_prune_outcome(const fs::path& run_dir);

}  // namespace headcount::prune
