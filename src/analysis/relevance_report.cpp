#include "headcount/analysis/relevance_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "headcount/analysis/head_table.h"
#include "headcount/common/io.h"
#include "headcount/common/plot.h"

namespace headcount::analysis {

using model::AttentionType;
using ojson = nlohmann::ordered_json;

namespace {

// Spearman of the heads' relevance share against `other`, over the heads of one type (or all),
// skipping heads without a value.
std::optional<double> rho(const std::vector<HeadId>& heads, const std::vector<double>& share,
                          const std::vector<double>& other, std::optional<AttentionType> type) {
  std::vector<double> x, y;
  for (size_t i = 0; i < heads.size(); ++i) {
    if (type && heads[i].type != *type) continue;
    if (std::isnan(share[i]) || std::isnan(other[i])) continue;
    x.push_back(share[i]);
    y.push_back(other[i]);
  }
  return spearman_of_three_or_more(x, y);
}

SpearmanByType rhos(const std::vector<HeadId>& heads, const std::vector<double>& share,
                    const std::vector<double>& other) {
  SpearmanByType s;
  s.all = rho(heads, share, other, std::nullopt);
  for (auto t : model::kAttentionTypes)
    s.by_type[static_cast<int>(t)] = rho(heads, share, other, t);
  return s;
}

std::vector<KeptVsRemoved> kept_vs_removed(const std::vector<HeadId>& heads,
                                           const std::vector<double>& share,
                                           const RemovalOrder& order) {
  std::vector<KeptVsRemoved> out;
  for (auto t : model::kAttentionTypes) {
    std::vector<double> kept, removed;
    for (size_t k = 0; k < order.gated.size(); ++k) {
      const size_t i = order.gated[k];
      if (heads[i].type != t || std::isnan(share[i])) continue;
      (order.kept(k) ? kept : removed).push_back(share[i]);
    }
    if (kept.empty() && removed.empty()) continue;
    out.push_back({t, static_cast<int>(kept.size()), static_cast<int>(removed.size()), mean(kept),
                   mean(removed)});
  }
  return out;
}

ojson to_json(const SpearmanByType& s) {
  ojson j;
  j["all"] = number_or_null(s.all);
  for (auto t : model::kAttentionTypes)
    j[model::attention_name(t)] = number_or_null(s.by_type[static_cast<int>(t)]);
  return j;
}

SpearmanByType spearman_from_json(const nlohmann::json& j) {
  SpearmanByType s;
  s.all = optional_number(j, "all");
  for (auto t : model::kAttentionTypes)
    s.by_type[static_cast<int>(t)] = optional_number(j, model::attention_name(t));
  return s;
}

double number_or_nan(const nlohmann::json& j, const char* key) {
  return optional_number(j, key).value_or(std::nan(""));
}

}  // namespace

void write_relevance_record(const fs::path& file, const RelevanceRecord& r) {
  ojson j;
  j["checkpoint"] = r.checkpoint;
  j["split"] = r.split;
  j["sentences"] = r.sentences;
  j["target_tokens"] = r.target_tokens;
  j["epsilon"] = r.epsilon;
  j["source_share_of_input_relevance"] = r.source_share;
  j["top_logit_share_reaching_embeddings"] = r.reached_embeddings;
  j["spearman_relevance_vs_confidence"] = to_json(r.vs_confidence);
  j["spearman_relevance_vs_importance"] = to_json(r.vs_importance);
  if (r.run) {
    j["run"] = *r.run;
    j["spearman_relevance_vs_removal_step"] = to_json(r.vs_removal_step);
    ojson kr;  // stays null when no type has gated heads
    for (const auto& k : r.kept_vs_removed)
      kr[model::attention_name(k.type)] = {
          {"kept", k.kept},
          {"removed", k.removed},
          {"mean_relevance_kept", number_or_null(k.mean_kept)},
          {"mean_relevance_removed", number_or_null(k.mean_removed)}};
    j["kept_vs_removed"] = kr;
  }
  io::write_file_atomic(file, j.dump(2) + "\n");
}

RelevanceRecord read_relevance_record(const fs::path& file) {
  const auto j = nlohmann::json::parse(io::read_file(file));
  RelevanceRecord r;
  r.checkpoint = j.value("checkpoint", "");
  r.split = j.value("split", "");
  r.sentences = j.value("sentences", int64_t{0});
  r.target_tokens = j.value("target_tokens", int64_t{0});
  r.epsilon = number_or_nan(j, "epsilon");
  r.source_share = number_or_nan(j, "source_share_of_input_relevance");
  r.reached_embeddings = number_or_nan(j, "top_logit_share_reaching_embeddings");
  r.vs_confidence =
      spearman_from_json(j.value("spearman_relevance_vs_confidence", nlohmann::json{}));
  r.vs_importance =
      spearman_from_json(j.value("spearman_relevance_vs_importance", nlohmann::json{}));
  if (j.contains("run") && j["run"].is_string()) r.run = j["run"].get<std::string>();
  r.vs_removal_step =
      spearman_from_json(j.value("spearman_relevance_vs_removal_step", nlohmann::json{}));
  const auto kr = j.value("kept_vs_removed", nlohmann::json{});
  for (auto t : model::kAttentionTypes) {
    if (!kr.is_object() || !kr.contains(model::attention_name(t))) continue;
    const auto& k = kr[model::attention_name(t)];
    r.kept_vs_removed.push_back({t, k.value("kept", 0), k.value("removed", 0),
                                 optional_number(k, "mean_relevance_kept"),
                                 optional_number(k, "mean_relevance_removed")});
  }
  return r;
}

RelevanceReport relevance_report(Analyzer& an, const AnalyzeOptions& options, double eps,
                                 const std::string& run) {
  const auto& heads = an.heads();
  RelevanceReport r;
  if (!run.empty()) r.order = read_removal_order(run, heads, options.checkpoint.string());
  r.relevance = an.relevance(eps);
  for (const auto& s : an.head_stats()) r.confidence.push_back(s.confidence());
  r.importance = an.importance(false);
  r.removal_step = removal_steps(r.order, heads, heads);
  const auto& rel = r.relevance;
  auto& rec = r.record;
  rec.checkpoint = options.checkpoint.string();
  rec.split = options.split;
  rec.sentences = rel.sentences;
  rec.target_tokens = rel.tokens;
  rec.epsilon = eps;
  rec.source_share = rel.source_share;
  rec.reached_embeddings = rel.reached_inputs;
  rec.vs_confidence = rhos(heads, rel.share, r.confidence);
  rec.vs_importance = rhos(heads, rel.share, r.importance);
  if (r.order) {
    rec.run = run;
    rec.vs_removal_step = rhos(heads, rel.share, r.removal_step);
    rec.kept_vs_removed = kept_vs_removed(heads, rel.share, *r.order);
  }
  return r;
}

void write_relevance_report(const fs::path& out, const Analyzer& an, const RelevanceReport& r) {
  const auto& heads = an.heads();
  const auto& rel = r.relevance;
  const AnalysisFolder folder{out};
  std::string csv = fmt::format(
      "attention,layer,head,relevance,relevance_token_mean,raw_relevance,confidence,"
      "importance{}\n",
      r.order ? ",removal_step,kept" : "");
  for (size_t i = 0; i < heads.size(); ++i) {
    csv +=
        fmt::format("{},{:.6g},{:.6g},{:.6g},{:.4f},{:.6g}", head_columns(heads[i]), rel.share[i],
                    rel.token_share[i], rel.raw[i], r.confidence[i], r.importance[i]);
    if (r.order) csv += removal_columns(*r.order, r.removal_step[i]);
    csv += "\n";
  }
  io::write_file_atomic(folder.relevance_table(), csv);
  plot::heatmaps(out / "relevance.png",
                 "LRP head relevance (share of the layer's head relevance to the top-1 logit)",
                 head_panels(an.architecture(), heads, rel.share), "relevance");
  write_relevance_record(folder.relevance(), r.record);
}

}  // namespace headcount::analysis
