// The goals of an experiment file checked on its gathered results (results.json's numbers).
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <optional>
#include <sstream>

#include "headcount/sweep/reproduce.h"

namespace headcount::sweep {
namespace {

using json = nlohmann::json;

// Heads kept of `type` ("all" or a type) from "e/d/de", the mean over the seeds where they
// differ ("1/15/23, 1/16/26": the goals are read on the seeds' means).
std::optional<double> kept(const json& row, const std::string& type) {
  const int at = type == "enc_self" ? 0 : type == "dec_self" ? 1 : type == "enc_dec" ? 2 : -1;
  std::istringstream in(row.value("heads", std::string()));
  double sum = 0;
  int seeds = 0;
  for (char comma = ','; comma == ','; ++seeds) {
    std::array<double, 3> h{};
    char a = 0, b = 0;
    if (!(in >> h[0] >> a >> h[1] >> b >> h[2]) || a != '/' || b != '/') return std::nullopt;
    sum += at < 0 ? h[0] + h[1] + h[2] : h[static_cast<size_t>(at)];
    if (!(in >> comma))
      comma = 0;  // the end: the last seed's counts
    else if (comma != ',')
      return std::nullopt;
  }
  return sum / seeds;
}

std::optional<double> change_of(const json& row, const std::string& split) {
  const auto key = split + "_change";
  if (!row.contains(key) || row[key].value("n", 0) == 0) return std::nullopt;
  return row[key].value("mean", 0.0);
}

std::string changes_text(const json& row, const std::vector<std::string>& splits) {
  std::string t;
  for (const auto& s : splits)
    if (const auto c = change_of(row, s))
      t += fmt::format("{}{} {:+.2f}", t.empty() ? "" : ", ", s, *c);
  return t;
}

// Whether every split's change is at least -within (and every split has one).
bool within(const json& row, const std::vector<std::string>& splits, double w) {
  for (const auto& s : splits) {
    const auto c = change_of(row, s);
    if (!c || *c < -w) return false;
  }
  return true;
}

// Every row of `kind` must pass `ok` (and there must be one): each listed with its changes.
template <typename Ok>
std::string every_row(const ExperimentSpec& e, const json& n, const std::string& kind,
                      const std::string& against, const std::string& none, Ok ok, bool& met) {
  std::string t;
  met = true;
  for (const auto& [name, row] : n.items()) {
    if (row.value("kind", "") != kind) continue;
    met &= ok(row);
    t += fmt::format("{}{}: {} against {}", t.empty() ? "" : "; ", name,
                     changes_text(row, e.splits), against);
  }
  met &= !t.empty();
  return t.empty() ? none : t;
}

std::string control_gain(const ExperimentGoal& g, const ExperimentSpec& e, const json& n,
                         bool& met) {
  return every_row(
      e, n, "control", "the baseline", "no control evaluated",
      [&](const json& row) {
        const auto c = change_of(row, e.splits.front());
        return c && *c <= g.max;
      },
      met);
}

// A head count: whole, or a mean over seeds with one decimal.
std::string count_text(double heads) {
  return std::abs(heads - std::round(heads)) < 1e-9 ? fmt::format("{:.0f}", heads)
                                                    : fmt::format("{:.1f}", heads);
}

// The worst of the splits' changes (nullopt where a split has none).
std::optional<double> worst_change(const json& row, const std::vector<std::string>& splits) {
  std::optional<double> worst;
  for (const auto& s : splits) {
    const auto c = change_of(row, s);
    if (!c) return std::nullopt;
    if (!worst || *c < *worst) worst = c;
  }
  return worst;
}

// Met by the run that removes the largest fraction within the margin; where none is within, the
// text names the run that removes enough with the smallest loss (the nearest to the goal).
std::string removed_within(const ExperimentGoal& g, const ExperimentSpec& e, const json& n,
                           bool& met) {
  const auto total = n.contains("baseline") ? kept(n["baseline"], g.heads_of) : std::nullopt;
  met = false;
  if (!total || *total <= 0) return "the baseline's heads are not known";
  std::string best, nearest;
  double best_fraction = -1, nearest_change = 0;
  for (const auto& [name, row] : n.items()) {
    if (row.value("kind", "") != "pruned") continue;
    const auto k = kept(row, g.heads_of);
    if (!k) continue;
    const double fraction = 1 - *k / *total;
    if (fraction < g.fraction) continue;
    const std::string text = fmt::format("{} removes {} of {} ({:.0f}%) at {} against its control",
                                         name, count_text(*total - *k), count_text(*total),
                                         100 * fraction, changes_text(row, e.splits));
    if (within(row, e.splits, g.within) && fraction > best_fraction)
      best = text, best_fraction = fraction;
    // A run without a change on some split is the nearest only where no other run removes enough.
    const double worst = worst_change(row, e.splits).value_or(-HUGE_VAL);
    if (nearest.empty() || worst > nearest_change) nearest = text, nearest_change = worst;
  }
  met = !best.empty();
  if (met) return best;
  return nearest.empty() ? "no run removes that many" : "not within; the nearest: " + nearest;
}

std::string scratch_within(const ExperimentGoal& g, const ExperimentSpec& e, const json& n,
                           bool& met) {
  return every_row(
      e, n, "scratch", "from trained", "no from-scratch run evaluated",
      [&](const json& row) { return within(row, e.splits, g.within); }, met);
}

}  // namespace

std::string goals_section(const ExperimentSpec& e, const json& numbers) {
  if (e.goals.empty()) return "";
  std::string md =
      "## Goals (on the seeds' means)\n\n| goal | result | met |\n| --- | --- | --- |\n";
  for (const auto& g : e.goals) {
    bool met = false;
    std::string result;
    if (g.kind == "control_gain")
      result = control_gain(g, e, numbers, met);
    else if (g.kind == "removed_within")
      result = removed_within(g, e, numbers, met);
    else
      result = scratch_within(g, e, numbers, met);
    md += fmt::format("| {} | {} | {} |\n", g.text.empty() ? g.kind : g.text, result,
                      met ? "yes" : "no");
  }
  return md;
}

}  // namespace headcount::sweep
