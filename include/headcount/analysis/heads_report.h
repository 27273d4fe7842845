// The files of `analyze heads` (heads.csv, syntax.csv, syntax_baseline.csv and heat maps) and of
// `analyze cluster` (js_TYPE.csv, mds.csv and the MDS plot): what each head does, and how alike
// the heads of one attention type are.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "headcount/analysis/analyzer.h"

namespace headcount::analysis {

// When a head counts as syntactic (syntactic_verdict in syntax.h).
struct SyntaxCriteria {
  std::vector<std::string> relations{"nsubj", "obj", "amod", "advmod"};
  double margin = 0.10;
  double min_arcs = 20;
};

// One row of heads.csv.
struct HeadRow {
  HeadId head;
  double confidence = 0, entropy = 0, attention_eos = 0;
  // Self-attention only (empty columns for encoder-decoder heads).
  bool self_attention = false;
  double attention_prev = 0, attention_same = 0, attention_next = 0;
  int64_t top_offset = 0;
  double top_offset_share = 0;
  bool positional = false;
  double rare_fraction = 0;
  std::optional<SyntacticVerdict> syntax;  // a judged relation (with parses, enc_self heads)
  std::string function;                    // HeadFunctions::label()
};

// What `analyze heads` finds; `syntax` and `verdicts` (one per syntax->heads) with parses only.
struct HeadsReport {
  std::vector<HeadRow> rows;  // order of an.heads()
  std::optional<SyntaxResult> syntax;
  std::vector<SyntacticVerdict> verdicts;
};
HeadsReport heads_report(Analyzer& an, const std::optional<std::vector<DepSentence>>& parses,
                         const SyntaxCriteria& criteria);

// heads.csv, syntax.csv and syntax_baseline.csv (with parses), and the heat maps.
void write_heads_report(const fs::path& out, const Analyzer& an, const HeadsReport& r,
                        const SyntaxCriteria& criteria);
void write_heads_csv(const fs::path& file, const std::vector<HeadRow>& rows);
// heads.csv read back: each row's functions ("positional", "rare-token", "syntactic", or "none"),
// the label of its last column split at '+'.
std::vector<std::vector<std::string>> read_head_functions(const fs::path& file);

// `analyze cluster`: the summed Jensen-Shannon distances between the heads of one attention type
// and their classical MDS embedding; types with fewer than three heads are left out.
struct HeadCluster {
  model::AttentionType type = model::AttentionType::kEncSelf;
  std::vector<size_t> members;  // indices into an.heads()
  torch::Tensor distances;      // [n, n]
  torch::Tensor coords;         // [n, 2]
};
std::vector<HeadCluster> cluster_heads(Analyzer& an);
// js_TYPE.csv, mds_TYPE.dat, mds.csv and (with at least one type) mds.gp and mds.png.
void write_clusters(const fs::path& out, const std::vector<HeadId>& heads,
                    const std::vector<HeadCluster>& clusters);

}  // namespace headcount::analysis
