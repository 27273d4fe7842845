// The files of `analyze relevance`: LRP head relevance (relevance.h) beside confidence, I_h and,
// with a prune run, its removal order (relevance.csv, relevance.json, relevance.png).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "headcount/analysis/analyzer.h"

namespace headcount::analysis {

// Spearman's correlation over all heads and over each attention type's (nullopt: fewer than
// three heads with values).
struct SpearmanByType {
  std::optional<double> all;
  std::array<std::optional<double>, 3> by_type;  // indexed by AttentionType
};

// Mean relevance of the gated heads of one attention type the run kept and of those it removed.
struct KeptVsRemoved {
  model::AttentionType type = model::AttentionType::kEncSelf;
  int kept = 0, removed = 0;
  std::optional<double> mean_kept, mean_removed;
};

// relevance.json.
struct RelevanceRecord {
  std::string checkpoint, split;
  int64_t sentences = 0, target_tokens = 0;
  double epsilon = 0;
  double source_share = 0;        // of the input relevance (NaN: written as null)
  double reached_embeddings = 0;  // share of the top logit
  SpearmanByType vs_confidence, vs_importance;
  // With a prune run only.
  std::optional<std::string> run;
  SpearmanByType vs_removal_step;
  std::vector<KeptVsRemoved> kept_vs_removed;  // types with gated heads
};
void write_relevance_record(const fs::path& file, const RelevanceRecord& r);
// Keys missing from the file stay at their defaults (no run: `run` empty).
RelevanceRecord read_relevance_record(const fs::path& file);

// Everything `analyze relevance` computes.
struct RelevanceReport {
  RelevanceResult relevance;
  std::vector<double> confidence, importance;  // order of an.heads()
  std::optional<RemovalOrder> order;           // with a prune run
  std::vector<double> removal_step;            // NaN: not gated, or no run
  RelevanceRecord record;
};
// `run` empty: no prune run.
RelevanceReport relevance_report(Analyzer& an, const AnalyzeOptions& options, double eps,
                                 const std::string& run);
// relevance.csv, relevance.png and relevance.json.
void write_relevance_report(const fs::path& out, const Analyzer& an, const RelevanceReport& r);

}  // namespace headcount::analysis
