// The run folder: every file and folder a run writes, by name, and a typed reader and writer for
// each file that more than one module reads. Trainer, prune, Fisher, sweep, report, analyses and
// bench all go through here; no other code spells a run-folder file name.
//
//   RUN/config.yaml            the run's resolved config
//   RUN/metrics.jsonl          one JSON record per line: "train", "eval" and "final" events
//   RUN/gates.jsonl            prune runs: every gate at every evaluation (GateSnapshot)
//   RUN/head_removal.csv       prune runs: one row per gated head, in removal order (HeadRemoval)
//   RUN/pruning.json           prune runs: the summary of the pruning
//   RUN/summary.json           written last: the run is complete
//   RUN/README.md              prune runs: a readable summary
//   RUN/checkpoints/{last,best,step-N}/   checkpoints
//   RUN/pruned/                prune runs: the physically pruned checkpoint
//   RUN/log.txt, RUN/sweep-exit.json      what a sweep keeps beside a run it started
//   RUN/.lock                  held by the process working on the run
//   OUT/compare.json           `analyze compare`: L0 against Michel et al.'s importance
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/model/architecture.h"

namespace headcount::run {

namespace fs = std::filesystem;

struct RunFolder {
  fs::path dir;

  fs::path config() const { return dir / "config.yaml"; }
  fs::path metrics() const { return dir / kMetrics; }
  fs::path gates() const { return dir / kGates; }
  fs::path head_removal() const { return dir / "head_removal.csv"; }
  fs::path pruning() const { return dir / "pruning.json"; }
  fs::path summary() const { return dir / "summary.json"; }
  fs::path readme() const { return dir / "README.md"; }
  fs::path checkpoints() const { return dir / "checkpoints"; }
  fs::path last() const { return checkpoints() / "last"; }
  fs::path best() const { return checkpoints() / "best"; }
  fs::path step_checkpoint(int64_t step) const;
  // The steps of the step-N checkpoints present, in no particular order.
  std::vector<int64_t> checkpoint_steps() const;
  fs::path pruned() const { return dir / "pruned"; }
  fs::path sweep_log() const { return dir / "log.txt"; }
  fs::path sweep_exit() const { return dir / "sweep-exit.json"; }
  // In the output folder of `analyze compare`: the L0-against-importance comparison.
  fs::path compare() const { return dir / "compare.json"; }

  static constexpr const char* kMetrics = "metrics.jsonl";
  static constexpr const char* kGates = "gates.jsonl";
  // Names a folder may hold before its first checkpoint (a run interrupted early).
  static bool is_early_run_file(const std::string& name);
};

// JSONL: one JSON value per line. Reading skips empty lines and a last line cut short by an
// interruption; another line that is not JSON is skipped with a warning naming file and line (a
// run resumed after a cut appends after it); a missing file reads as empty.
std::vector<nlohmann::json> read_jsonl(const fs::path& file);
void append_jsonl(const fs::path& file, const nlohmann::json& record);
// Rewrites `file` (atomically) with the lines whose record `keep` accepts, byte for byte; lines
// cut short by an interruption go.
void trim_jsonl(const fs::path& file, const std::function<bool(const nlohmann::json&)>& keep);

// summary.json, written last (its presence means the run is complete): one type for every kind
// of run. A training or L0 prune run (train::Trainer) sets status, steps, the best checkpoint's
// metric, the precision and its throughput; a post-training method (Fisher) its command, method,
// times and dev BLEU before and after. Keys of unset fields are not written.
struct RunSummary {
  std::optional<std::string> status;   // "finished" or "early-stopped"
  std::optional<std::string> command;  // post-training: "prune"
  std::optional<std::string> method;   // post-training: "fisher"
  std::optional<int64_t> steps, best_step;
  std::optional<std::string> best_metric;  // "bleu" or "loss"
  std::optional<double> best_score;        // the metric itself (a loss as a loss)
  std::optional<std::string> precision, precision_reason;
  std::optional<double> train_seconds, target_tokens_per_s;
  std::optional<int64_t> world_size;  // distributed runs
  std::optional<bool> parameters_identical_across_processes;
  std::optional<double> seconds, pruning_seconds;  // post-training: total, the pruning alone
  std::optional<double> dev_bleu_start, dev_bleu_end;
  nlohmann::ordered_json to_json() const;
  // Errors name `origin` and the key.
  static RunSummary from_json(const nlohmann::json& j, const std::string& origin);
};
void write_summary(const RunFolder& folder, const RunSummary& summary);
// Errors name the file.
RunSummary read_summary(const RunFolder& folder);

// metrics.jsonl: the "eval" record of `step`, if any.
std::optional<nlohmann::json> eval_record(const fs::path& metrics, int64_t step);

// gates.jsonl: one line per evaluation of a prune run.
struct GateValue {
  model::HeadId head;
  double p_open = 0;  // P(gate > 0)
  double gate = 0;    // the deterministic (evaluation) gate value
};
struct GateSnapshot {
  int64_t step = 0;
  double dev_bleu = 0;
  bool final = false;  // the run's final gates (the last line of a finished run)
  std::vector<GateValue> heads;
  nlohmann::json to_json() const;
};
void append_gates(const fs::path& file, const GateSnapshot& snapshot);
// Errors name the file and line.
std::vector<GateSnapshot> read_gates(const fs::path& file);

// head_removal.csv: one row per gated (or prunable) head, removed heads first in removal order.
// L0 runs write p_open, gate and the dev BLEU at removal; Fisher runs the head's Fisher
// importance and whether it was kept.
struct HeadRemoval {
  model::HeadId head;
  std::optional<int64_t> removal_step;  // L0: first evaluation with the gate 0 to the end;
                                        // Fisher: rank in the removal order. Empty: kept.
  std::optional<double> p_open, gate;   // L0
  std::optional<double> fisher;         // Fisher
  std::optional<double> dev_bleu;       // L0: dev BLEU of the evaluation at removal
};
enum class HeadRemovalKind { kL0, kFisher };
std::string head_removal_csv(const std::vector<HeadRemoval>& rows, HeadRemovalKind kind);
void write_head_removal(const fs::path& file, const std::vector<HeadRemoval>& rows,
                        HeadRemovalKind kind);
// Reads either kind by its header's column names; errors name the file, line and column.
std::vector<HeadRemoval> read_head_removal(const fs::path& file);

}  // namespace headcount::run
