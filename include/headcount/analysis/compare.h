// A prune run (L0 or Fisher) against Michel et al.'s importance pruning at equal head counts
// (`headcount analyze compare`): BLEU with each method's heads masked, optionally after
// fine-tuning Michel's pruned model with the run's own budget, and where the heads that I_h and
// confidence rank highest stand in the run's removal order (Spearman). compare.json's keys say
// "l0" for the run's heads whatever its method (their names predate Fisher runs); its "method"
// says which it was.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "headcount/analysis/analyzer.h"
#include "headcount/common/choices.h"

namespace headcount::analysis {

struct CompareOptions {
  fs::path run;            // the prune run (head_removal.csv, pruned/, config.yaml)
  fs::path out;            // compare.json, and the fine-tuning's folders and log
  bool normalize = false;  // I_h normalised per layer (Michel et al.)
  bool finetune = false;   // fine-tune Michel's pruned model with the run's budget
  // Write Michel's pruned model (OUT/michel-pruned, physically smaller, not fine-tuned) for `eval`
  // and `bench decode`; --finetune writes it too.
  bool export_michel = false;
  int finetune_threads = 0;  // its BLAS threads (0: the config's)
  fs::path executable;       // headcount itself: the fine-tuning runs as `headcount train`
};

// One of the heads I_h ranks highest, and when the run removed it.
struct TopImportanceHead {
  std::string head;  // HeadId::label()
  double importance = 0;
  std::optional<double> removal_step;  // nullopt: the run kept it
};

// compare.json. Numbers written as null (NaN) read back as NaN.
struct CompareRecord {
  std::string checkpoint, run;
  std::string method;  // the run's prune.method
  int sentences = 0;
  size_t gated_heads = 0, removed_heads = 0;
  double bleu_full = 0;
  double bleu_l0_masked = 0;                // "bleu_l0_heads_masked_no_finetuning"
  double bleu_michel_masked = 0;            // "bleu_michel_same_counts_masked_no_finetuning"
  std::optional<double> bleu_l0_tuned;      // "bleu_l0_pruned_checkpoint_finetuned"
  std::optional<double> bleu_michel_tuned;  // "bleu_michel_pruned_finetuned_same_budget"
  std::vector<std::string> michel_removed_heads;
  double spearman_importance = 0, spearman_confidence = 0;  // "spearman_*_vs_removal_step"
  std::vector<TopImportanceHead> top_importance_heads;
};
void write_compare_record(const fs::path& file, const CompareRecord& r);
CompareRecord read_compare_record(const fs::path& file);

struct CompareResult {
  PruneMethod method = PruneMethod::kL0;  // the run's prune.method
  size_t gated = 0, removed = 0;          // heads gated in the run, removed by it
  double bleu_full = 0;
  double bleu_l0_masked = 0;                // the run's removed heads masked, no fine-tuning
  double bleu_michel_masked = 0;            // as many least-I_h heads per type masked
  std::optional<double> bleu_l0_tuned;      // the run's pruned/ checkpoint (fine-tuned or refit)
  std::optional<double> bleu_michel_tuned;  // Michel's pruned model fine-tuned (finetune)
  std::vector<HeadId> michel_removed;
  double spearman_importance = 0, spearman_confidence = 0;  // against the removal step
  CompareRecord record;                                     // compare.json, as written
};

// The fine-tuning steps that trained a prune run's exported weights, the budget Michel's pruned
// model gets (--finetune): when the run put its weights back to the unpruned model's at the fixed
// mask (prune.rewind: its gated steps only chose the heads), the steps after the fixing step:
// prune.recovery_steps, or with prune.fix_at_target and no prune.exact_recovery, train.max_steps
// - mask_fixed_at (the step the run fixed its mask at, from its last checkpoint; -1 unknown:
// recovery_steps, the least it can be); otherwise train.max_steps (the gated steps trained the
// weights too).
int finetune_budget(const Config& run_config, int64_t mask_fixed_at = -1);

// The --set assignments (KEY=VALUE) that make `train RUN/config.yaml` fine-tune for
// finetune_budget's steps: none when that is train.max_steps; otherwise the budget and the run's
// recovery settings turned off (they are the gated fine-tuning's, and would refuse max_steps equal
// to recovery_steps).
std::vector<std::string> finetune_sets(const Config& run_config, int64_t mask_fixed_at = -1);

// Writes OUT/compare.json (with export_michel or finetune OUT/michel-pruned; with finetune also
// OUT/michel-finetuned and OUT/michel-finetune.log; an interrupted fine-tuning resumes).
CompareResult compare_l0_with_importance(const AnalyzeOptions& options, const CompareOptions& c);

}  // namespace headcount::analysis
