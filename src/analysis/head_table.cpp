#include "headcount/analysis/head_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include "headcount/analysis/head_stats.h"
#include "headcount/run/run_folder.h"

namespace headcount::analysis {

fs::path AnalysisFolder::compare() const {
  return run::RunFolder{dir}.compare();
}

std::string head_columns(const HeadId& h) {
  return fmt::format("{},{},{}", model::attention_name(h.type), h.layer, h.head);
}

std::vector<plot::Panel> head_panels(const model::Architecture& arch,
                                     const std::vector<HeadId>& heads,
                                     const std::vector<double>& values) {
  std::vector<plot::Panel> out;
  for (auto t : model::kAttentionTypes) {
    const auto& per_layer = arch.heads(t);
    if (per_layer.empty()) continue;
    int64_t width = 0;
    for (auto h : per_layer) width = std::max(width, h);
    if (width == 0) continue;
    plot::Panel p;
    p.title = model::attention_name(t);
    p.values.assign(per_layer.size(), std::vector<double>(width, std::nan("")));
    for (size_t i = 0; i < heads.size(); ++i)
      if (heads[i].type == t) p.values[heads[i].layer][heads[i].head] = values[i];
    out.push_back(p);
  }
  return out;
}

std::vector<double> removal_steps(const std::optional<RemovalOrder>& order,
                                  const std::vector<HeadId>& all, const std::vector<HeadId>& of) {
  if (!order) return std::vector<double>(of.size(), std::nan(""));
  std::map<std::tuple<int, int64_t, int64_t>, double> by_head;
  for (size_t k = 0; k < order->gated.size(); ++k) {
    const auto& h = all[order->gated[k]];
    by_head[{static_cast<int>(h.type), h.layer, h.head}] = order->step[k];
  }
  std::vector<double> out;
  for (const auto& h : of) {
    const auto it = by_head.find({static_cast<int>(h.type), h.layer, h.head});
    out.push_back(it == by_head.end() ? std::nan("") : it->second);
  }
  return out;
}

std::string removal_columns(const RemovalOrder& order, double step) {
  if (std::isnan(step)) return ",,";
  if (step > order.last) return ",,1";
  return fmt::format(",{:g},0", step);
}

std::optional<double> spearman_of_three_or_more(const std::vector<double>& x,
                                                const std::vector<double>& y) {
  if (x.size() < 3) return std::nullopt;
  return spearman(x, y);
}

std::optional<double> mean(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double sum = 0;  // summed in order, as the analyses always have
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

nlohmann::ordered_json number_or_null(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::optional<double> optional_number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

}  // namespace headcount::analysis
