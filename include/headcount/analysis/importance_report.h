// The files of `analyze importance` (importance.csv, pruning_curve.{csv,dat,gp,png}) and of
// `analyze ablate` (ablate.csv, keep_one.csv): BLEU with heads masked, by Michel et al.'s
// importance I_h and one head at a time. Each step that decodes logs what it found as it goes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headcount/analysis/analyzer.h"

namespace headcount::analysis {

// importance.csv and importance.png: I_h of every head (order of an.heads()).
void write_importance(const fs::path& out, const Analyzer& an, const std::vector<double>& score,
                      bool normalized, ImportanceUnit unit = ImportanceUnit::kToken);

// The pruning curve: BLEU with the least important 0%, 10%, ..., 90% of a set of heads masked.
struct PruningCurvePoint {
  int tenths = 0;     // masked fraction in tenths
  size_t masked = 0;  // heads masked
  double bleu = 0;
};
struct PruningCurveSet {
  std::string name;  // "all" or an attention type
  std::vector<PruningCurvePoint> points;
};
// All heads, then each attention type with heads.
std::vector<PruningCurveSet> pruning_curve(Analyzer& an, const std::vector<double>& score);
// pruning_curve.csv, .dat, .gp and (with gnuplot) .png.
void write_pruning_curve(const fs::path& out, const std::vector<PruningCurveSet>& curve);

// BLEU with each single head masked in turn.
struct Ablation {
  double base = 0;           // every head
  std::vector<double> bleu;  // order of an.heads()
  std::vector<double> change() const;
};
Ablation ablate_each_head(Analyzer& an);
// ablate.csv and ablate.png.
void write_ablation(const fs::path& out, const Analyzer& an, const Ablation& a);

// Michel's Table 2: the best single head to keep in a layer of two or more heads.
struct KeepOneRow {
  model::AttentionType type = model::AttentionType::kEncSelf;
  size_t layer = 0;
  int64_t heads = 0, best_head = -1;
  double bleu = -1;
};
std::vector<KeepOneRow> keep_one_head(Analyzer& an, double base);
// keep_one.csv; `base` is the BLEU with every head.
void write_keep_one(const fs::path& out, const std::vector<KeepOneRow>& rows, double base);

}  // namespace headcount::analysis
