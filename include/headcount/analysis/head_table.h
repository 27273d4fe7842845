// What the analyses' output files share: a head's leading CSV columns, values per head as heat-map
// panels, a prune run's removal order as columns, Spearman's correlation where there are enough
// heads, and the names of the files `headcount analyze` writes into its --out folder.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/analysis/analyzer.h"
#include "headcount/common/plot.h"
#include "headcount/model/architecture.h"

namespace headcount::analysis {

// The --out folder of `headcount analyze`: every file its subcommands write that another module
// reads (the sweep report reads heads.csv, syntax.csv, relevance.json and compare.json).
struct AnalysisFolder {
  fs::path dir;

  fs::path heads() const { return dir / "heads.csv"; }
  fs::path syntax() const { return dir / "syntax.csv"; }
  fs::path syntax_baseline() const { return dir / "syntax_baseline.csv"; }
  fs::path relevance() const { return dir / "relevance.json"; }
  fs::path relevance_table() const { return dir / "relevance.csv"; }
  fs::path align() const { return dir / "align.json"; }
  fs::path compare() const;  // run::RunFolder's compare.json
};

// "attention,layer,head" of one head: the leading columns of every per-head CSV row.
std::string head_columns(const HeadId& h);

// Values per head (in the order of `heads`) as one panel per attention type, layers x heads;
// a type without heads has no panel.
std::vector<plot::Panel> head_panels(const model::Architecture& arch,
                                     const std::vector<HeadId>& heads,
                                     const std::vector<double>& values);

// The removal step of each of `of` in a prune run's order (NaN: a head the run did not gate);
// `all` are the heads the order indexes. Without an order, all NaN.
std::vector<double> removal_steps(const std::optional<RemovalOrder>& order,
                                  const std::vector<HeadId>& all, const std::vector<HeadId>& of);

// The CSV columns ",removal_step,kept" of one head: both empty for a head the run did not gate,
// no step for a kept head.
std::string removal_columns(const RemovalOrder& order, double step);

// Spearman's rank correlation (head_stats.h) of at least three pairs; nullopt with fewer.
std::optional<double> spearman_of_three_or_more(const std::vector<double>& x,
                                                const std::vector<double>& y);

// The arithmetic mean; nullopt for no values.
std::optional<double> mean(const std::vector<double>& values);

// A number or JSON null.
nlohmann::ordered_json number_or_null(const std::optional<double>& v);
// The reverse: nullopt for null or a missing key.
std::optional<double> optional_number(const nlohmann::json& j, const char* key);

}  // namespace headcount::analysis
