#include "headcount/analysis/importance_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "headcount/analysis/head_table.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/plot.h"

namespace headcount::analysis {

void write_importance(const fs::path& out, const Analyzer& an, const std::vector<double>& score,
                      bool normalized, ImportanceUnit unit) {
  const auto& heads = an.heads();
  std::string csv = "attention,layer,head,importance\n";
  for (size_t i = 0; i < heads.size(); ++i)
    csv += fmt::format("{},{:.6g}\n", head_columns(heads[i]), score[i]);
  io::write_file_atomic(out / "importance.csv", csv);
  plot::heatmaps(out / "importance.png",
                 fmt::format("Head importance I_h{}{}",
                             unit == ImportanceUnit::kToken      ? ""
                             : unit == ImportanceUnit::kSentence ? " (per sentence)"
                                                                 : " (signed, over the split)",
                             normalized ? " (layer-normalised)" : ""),
                 head_panels(an.architecture(), heads, score), "I_h");
}

namespace {

// Head indices of each curve set: all heads, then each attention type with heads.
std::vector<std::pair<std::string, std::vector<size_t>>> curve_sets(
    const std::vector<HeadId>& heads) {
  std::vector<std::pair<std::string, std::vector<size_t>>> sets = {{"all", {}}};
  for (size_t i = 0; i < heads.size(); ++i) sets[0].second.push_back(i);
  for (auto t : model::kAttentionTypes) {
    std::vector<size_t> m;
    for (size_t i = 0; i < heads.size(); ++i)
      if (heads[i].type == t) m.push_back(i);
    if (!m.empty()) sets.emplace_back(model::attention_name(t), m);
  }
  return sets;
}

}  // namespace

std::vector<PruningCurveSet> pruning_curve(Analyzer& an, const std::vector<double>& score) {
  const auto& heads = an.heads();
  std::vector<PruningCurveSet> curve;
  for (auto& [name, members] : curve_sets(heads)) {
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t x, size_t y) { return score[x] < score[y]; });
    PruningCurveSet set{name, {}};
    for (int k = 0; k <= 9; ++k) {
      const size_t n = members.size() * k / 10;
      std::vector<HeadId> masked;
      for (size_t i = 0; i < n; ++i) masked.push_back(heads[members[i]]);
      const double b = an.bleu(masked);
      log::info("pruning curve {}: {}% ({} heads) masked: BLEU {:.2f}", name, k * 10, n, b);
      set.points.push_back({k, n, b});
    }
    curve.push_back(std::move(set));
  }
  return curve;
}

void write_pruning_curve(const fs::path& out, const std::vector<PruningCurveSet>& curve) {
  std::string csv = "set,fraction,masked,bleu\n";
  std::string dat;
  for (const auto& set : curve) {
    dat += fmt::format("# {}\n", set.name);
    for (const auto& p : set.points) {
      csv += fmt::format("{},{:.1f},{},{:.4f}\n", set.name, p.tenths / 10.0, p.masked, p.bleu);
      dat += fmt::format("{} {}\n", p.tenths * 10, p.bleu);
    }
    dat += "\n\n";
  }
  io::write_file_atomic(out / "pruning_curve.csv", csv);
  io::write_file_atomic(out / "pruning_curve.dat", dat);
  std::string gp = "set terminal pngcairo noenhanced size 800,560 font ',11'\n";
  gp += fmt::format("set output {}\n", plot::quote(out / "pruning_curve.png"));
  gp += "set xlabel 'heads masked, least important first (%)'\nset ylabel 'BLEU'\nset grid\n";
  gp += "set key bottom left\nplot ";
  for (size_t k = 0; k < curve.size(); ++k) {
    gp += fmt::format("{}{} index {} using 1:2 with linespoints title '{}'", k ? ", \\\n  " : "",
                      plot::quote(out / "pruning_curve.dat"), k, curve[k].name);
  }
  gp += "\n";
  io::write_file_atomic(out / "pruning_curve.gp", gp);
  plot::run_gnuplot(out / "pruning_curve.gp");
}

std::vector<double> Ablation::change() const {
  std::vector<double> c;
  for (double b : bleu) c.push_back(b - base);
  return c;
}

Ablation ablate_each_head(Analyzer& an) {
  const auto& heads = an.heads();
  Ablation a;
  a.base = an.bleu({});
  log::info("BLEU with every head: {:.2f}; masking each of {} heads in turn", a.base, heads.size());
  for (size_t i = 0; i < heads.size(); ++i) {
    const double b = an.bleu({heads[i]});
    a.bleu.push_back(b);
    log::info("[{}/{}] {} masked: BLEU {:.2f} ({:+.2f})", i + 1, heads.size(), heads[i].label(), b,
              b - a.base);
  }
  return a;
}

void write_ablation(const fs::path& out, const Analyzer& an, const Ablation& a) {
  const auto& heads = an.heads();
  std::string csv = "attention,layer,head,bleu,change\n";
  for (size_t i = 0; i < heads.size(); ++i)
    csv +=
        fmt::format("{},{:.4f},{:+.4f}\n", head_columns(heads[i]), a.bleu[i], a.bleu[i] - a.base);
  io::write_file_atomic(out / "ablate.csv", csv);
  plot::heatmaps(out / "ablate.png",
                 fmt::format("BLEU change when one head is masked (base {:.2f})", a.base),
                 head_panels(an.architecture(), heads, a.change()), "BLEU change");
}

std::vector<KeepOneRow> keep_one_head(Analyzer& an, double base) {
  std::vector<KeepOneRow> rows;
  for (auto t : model::kAttentionTypes) {
    const auto per_layer = an.architecture().heads(t);
    for (size_t l = 0; l < per_layer.size(); ++l) {
      if (per_layer[l] < 2) continue;
      KeepOneRow row{t, l, per_layer[l], -1, -1};
      for (int64_t keep_h = 0; keep_h < per_layer[l]; ++keep_h) {
        std::vector<HeadId> masked;
        for (int64_t h = 0; h < per_layer[l]; ++h)
          if (h != keep_h) masked.push_back({t, static_cast<int64_t>(l), h});
        const double b = an.bleu(masked);
        if (b > row.bleu) row.bleu = b, row.best_head = keep_h;
      }
      log::info("{} layer {}: best single head {} gives BLEU {:.2f} ({:+.2f})",
                model::attention_name(t), l, row.best_head, row.bleu, row.bleu - base);
      rows.push_back(row);
    }
  }
  return rows;
}

void write_keep_one(const fs::path& out, const std::vector<KeepOneRow>& rows, double base) {
  std::string keep = "attention,layer,heads,best_head,bleu,change\n";
  for (const auto& r : rows)
    keep += fmt::format("{},{},{},{},{:.4f},{:+.4f}\n", model::attention_name(r.type), r.layer,
                        r.heads, r.best_head, r.bleu, r.bleu - base);
  io::write_file_atomic(out / "keep_one.csv", keep);
}

}  // namespace headcount::analysis
