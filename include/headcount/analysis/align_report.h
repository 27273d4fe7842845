// The files of `analyze align`: the encoder-decoder heads as word aligners (alignment.h) against
// gold links, and with a prune run whether it kept the heads that align (align.csv,
// align_layers.csv, align_baseline.csv, align.json, align.png).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "headcount/analysis/analyzer.h"

namespace headcount::analysis {

// The reference to force-decode and its gold links.
struct AlignInputs {
  fs::path targets_file, links_file;
  std::vector<std::string> targets;
  std::vector<std::vector<data::WordLink>> links;
};
// `target` "kjv" (SPLIT.kjv.en, SPLIT.kjv.links) or "web" (the split's target, SPLIT.links) in
// the checkpoint's data folder; `links_file` (non-empty) replaces the folder's links. Fails when
// the links are missing or their line count differs from the reference's.
AlignInputs read_align_inputs(const AnalyzeOptions& options, const std::string& target,
                              const std::string& links_file);

// A best aligner: which one (a head's index in AlignmentResult::heads, or a layer) and whether
// its better query convention is "input" (else "predict").
struct BestAligner {
  size_t index = 0;
  bool input = false;
  AlignCounts counts;
};
struct AlignLayer {
  size_t layer = 0;
  int64_t heads = 0;
  AlignCounts predict, input;
};
struct KeptAligner {
  std::string head;
  double precision = 0;  // the better convention's
  bool aligns = false;
};
// With a prune run: which aligning heads it kept.
struct AlignKept {
  std::string run;
  std::optional<double> spearman;  // best precision against removal step (gated heads)
  std::vector<KeptAligner> kept_heads;
  int64_t kept_aligning = 0, kept = 0, removed_aligning = 0, removed = 0;
};

// align.json.
struct AlignRecord {
  std::string checkpoint, split, target, links;
  int64_t sentences = 0, skipped = 0, target_words = 0, linked_words = 0;
  std::string baseline_name;  // the best baseline
  AlignCounts baseline;
  std::optional<BestAligner> best_head, best_layer;  // with encoder-decoder heads
  std::string best_head_label;
  std::vector<AlignLayer> layers;
  double margin = 0;
  int64_t aligning_heads = 0;
  std::optional<AlignKept> kept;
};
void write_align_record(const fs::path& file, const AlignRecord& r);

// Everything `analyze align` computes.
struct AlignReport {
  AlignmentResult result;
  std::optional<RemovalOrder> order;
  std::vector<double> removal_step;  // per result.heads (NaN: not gated, or no run)
  std::vector<bool> aligns;          // per result.heads: best precision >= baseline + margin
  AlignRecord record;
};
// `run` empty: no prune run. Fails when no sentence could be scored.
AlignReport align_report(Analyzer& an, const AnalyzeOptions& options, const AlignInputs& in,
                         const std::string& run, double margin);
// align.csv, align_layers.csv, align_baseline.csv, align.png and align.json.
void write_align_report(const fs::path& out, const Analyzer& an, const AlignReport& r);

}  // namespace headcount::analysis
