#include "headcount/analysis/heads_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <tuple>

#include "headcount/analysis/head_stats.h"
#include "headcount/analysis/head_table.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/plot.h"
#include "headcount/common/text.h"

namespace headcount::analysis {

using model::AttentionType;

namespace {

constexpr DepDirection kDirections[] = {DepDirection::kDependentToHead,
                                        DepDirection::kHeadToDependent};

using HeadKey = std::tuple<int, int64_t, int64_t>;
HeadKey key_of(const HeadId& h) {
  return {static_cast<int>(h.type), h.layer, h.head};
}

HeadRow head_row(const HeadId& h, const HeadStats& s, const std::optional<SyntacticVerdict>& v) {
  HeadRow row;
  row.head = h;
  row.confidence = s.confidence();
  row.entropy = s.entropy();
  row.attention_eos = s.attention_to_eos();
  row.self_attention = h.type != AttentionType::kEncDec;
  row.attention_prev = s.attention_prev();
  row.attention_same = s.attention_same();
  row.attention_next = s.attention_next();
  std::tie(row.top_offset, row.top_offset_share) = s.top_offset();
  const bool syntactic = v && v->syntactic;
  const auto fn = head_functions(s, row.self_attention, syntactic);
  row.positional = fn.positional;
  row.rare_fraction = s.rare_fraction();
  row.syntax = v;
  row.function = fn.label();
  return row;
}

void write_syntax_csv(const fs::path& file, const SyntaxResult& r) {
  std::string sc =
      "attention,layer,head,relation,direction,arcs,accuracy,baseline,baseline_offset,gain\n";
  for (size_t k = 0; k < r.heads.size(); ++k)
    for (const auto& [rel, _] : r.baseline.counts)
      for (auto d : kDirections) {
        const auto it = r.stats[k].relations.find(rel);
        if (it == r.stats[k].relations.end()) continue;
        const auto& c = it->second[static_cast<int>(d)];
        const auto [off, base] = r.baseline.best(rel, d);
        sc += fmt::format("{},{},{},{},{:.4f},{:.4f},{},{:+.4f}\n", head_columns(r.heads[k]), rel,
                          direction_name(d), c.total, c.accuracy(), base, off, c.accuracy() - base);
      }
  io::write_file_atomic(file, sc);
}

void write_syntax_baseline_csv(const fs::path& file, const OffsetBaseline& b) {
  std::string bc = "relation,direction,arcs,best_offset,accuracy\n";
  for (const auto& [rel, _] : b.counts)
    for (auto d : kDirections) {
      const auto [off, acc] = b.best(rel, d);
      bc += fmt::format("{},{},{},{},{:.4f}\n", rel, direction_name(d), b.arcs(rel, d), off, acc);
    }
  io::write_file_atomic(file, bc);
}

// Confidence and entropy maps, and with parses the encoder self-attention heads' syntactic gain.
void write_head_plots(const fs::path& out, const Analyzer& an, const HeadsReport& r,
                      const SyntaxCriteria& criteria) {
  const auto& heads = an.heads();
  std::vector<double> conf, ent, gain;
  for (const auto& row : r.rows) {
    conf.push_back(row.confidence);
    ent.push_back(row.entropy);
    gain.push_back(row.syntax ? row.syntax->accuracy - row.syntax->baseline : std::nan(""));
  }
  plot::heatmaps(out / "confidence.png", "Head confidence (mean max weight, EOS excluded)",
                 head_panels(an.architecture(), heads, conf), "confidence");
  plot::heatmaps(out / "entropy.png", "Attention entropy (nats)",
                 head_panels(an.architecture(), heads, ent), "entropy");
  if (!r.syntax) return;
  std::vector<plot::Panel> p;
  for (auto& panel : head_panels(an.architecture(), heads, gain))
    if (panel.title == model::attention_name(AttentionType::kEncSelf)) p.push_back(panel);
  if (!p.empty())
    plot::heatmaps(out / "syntax.png",
                   fmt::format("Best syntactic accuracy minus its fixed-offset baseline ({})",
                               fmt::join(criteria.relations, ", ")),
                   p, "accuracy gain");
}

}  // namespace

HeadsReport heads_report(Analyzer& an, const std::optional<std::vector<DepSentence>>& parses,
                         const SyntaxCriteria& criteria) {
  HeadsReport r;
  const auto stats = an.head_stats();
  std::map<HeadKey, SyntacticVerdict> by_head;
  if (parses) {
    r.syntax = an.syntax(*parses);
    log::info("syntax: {} sentences matched their parses, {} skipped (pieces and words differ)",
              r.syntax->sentences, r.syntax->unmatched);
    for (size_t k = 0; k < r.syntax->heads.size(); ++k) {
      r.verdicts.push_back(syntactic_verdict(r.syntax->stats[k], r.syntax->baseline,
                                             criteria.relations, criteria.margin,
                                             criteria.min_arcs));
      by_head[key_of(r.syntax->heads[k])] = r.verdicts.back();
    }
  }
  const auto& heads = an.heads();
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto v = by_head.find(key_of(heads[i]));
    // A verdict without a relation: no relation had enough arcs to judge.
    const bool judged = v != by_head.end() && !v->second.relation.empty();
    r.rows.push_back(
        head_row(heads[i], stats[i], judged ? std::optional(v->second) : std::nullopt));
  }
  return r;
}

void write_heads_report(const fs::path& out, const Analyzer& an, const HeadsReport& r,
                        const SyntaxCriteria& criteria) {
  if (r.syntax) {
    write_syntax_csv(out / "syntax.csv", *r.syntax);
    write_syntax_baseline_csv(out / "syntax_baseline.csv", r.syntax->baseline);
  }
  write_heads_csv(out / "heads.csv", r.rows);
  write_head_plots(out, an, r, criteria);
}

void write_heads_csv(const fs::path& file, const std::vector<HeadRow>& rows) {
  std::string csv =
      "attention,layer,head,confidence,entropy,attention_eos,attention_prev,attention_same,"
      "attention_next,top_offset,top_offset_share,positional,rare_fraction,syntactic,"
      "syntactic_relation,syntactic_accuracy,syntactic_baseline,function\n";
  const auto four = [](double v) { return fmt::format("{:.4f}", v); };
  for (const auto& r : rows) {
    const bool self = r.self_attention;
    const auto& v = r.syntax;
    csv += fmt::format("{},{:.4f},{:.4f},{:.4f},{},{},{},{},{},{},{:.4f},{},{},{},{},{}\n",
                       head_columns(r.head), r.confidence, r.entropy, r.attention_eos,
                       self ? four(r.attention_prev) : "", self ? four(r.attention_same) : "",
                       self ? four(r.attention_next) : "", self ? std::to_string(r.top_offset) : "",
                       self ? four(r.top_offset_share) : "", r.positional ? 1 : 0, r.rare_fraction,
                       v ? (v->syntactic ? "1" : "0") : "",
                       v ? v->relation + " " + direction_name(v->direction) : "",
                       v ? four(v->accuracy) : "", v ? four(v->baseline) : "", r.function);
  }
  io::write_file_atomic(file, csv);
}

std::vector<std::vector<std::string>> read_head_functions(const fs::path& file) {
  const auto lines = io::read_lines(file);
  std::vector<std::vector<std::string>> out;
  for (size_t i = 1; i < lines.size(); ++i)
    out.push_back(text::split(text::split(lines[i], ',').back(), '+'));
  return out;
}

std::vector<HeadCluster> cluster_heads(Analyzer& an) {
  const auto& heads = an.heads();
  std::vector<HeadCluster> out;
  for (auto t : model::kAttentionTypes) {
    HeadCluster c;
    c.type = t;
    for (size_t i = 0; i < heads.size(); ++i)
      if (heads[i].type == t) c.members.push_back(i);
    if (c.members.size() < 3) continue;
    c.distances = an.js_distances(t);
    c.coords = classical_mds(c.distances, 2);
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

void write_distances(const fs::path& file, const torch::Tensor& d) {
  std::string m;
  for (int64_t i = 0; i < d.size(0); ++i) {
    std::vector<std::string> row;
    for (int64_t j = 0; j < d.size(1); ++j)
      row.push_back(fmt::format("{:.6g}", d[i][j].item<double>()));
    m += fmt::format("{}\n", fmt::join(row, ","));
  }
  io::write_file_atomic(file, m);
}

}  // namespace

void write_clusters(const fs::path& out, const std::vector<HeadId>& heads,
                    const std::vector<HeadCluster>& clusters) {
  std::string mds_csv = "attention,layer,head,x,y\n";
  std::string gp = "set terminal pngcairo noenhanced size 1300,460 font ',10'\n";
  gp += fmt::format("set output {}\n", plot::quote(out / "mds.png"));
  gp +=
      "set multiplot layout 1,3 title 'Heads by Jensen-Shannon distance (classical MDS; label: "
      "layer)'\nset key off\nset grid\n";
  for (const auto& c : clusters) {
    const std::string name = model::attention_name(c.type);
    write_distances(out / fmt::format("js_{}.csv", name), c.distances);
    std::string dat;
    for (size_t k = 0; k < c.members.size(); ++k) {
      const auto& h = heads[c.members[k]];
      const double px = c.coords[k][0].item<double>(), py = c.coords[k][1].item<double>();
      mds_csv += fmt::format("{},{:.6g},{:.6g}\n", head_columns(h), px, py);
      dat += fmt::format("{} {} {} {}\n", px, py, h.layer, h.head);
    }
    const fs::path f = out / fmt::format("mds_{}.dat", name);
    io::write_file_atomic(f, dat);
    gp += fmt::format(
        "set title '{}'\nplot {} using 1:2:3 with points pt 7 ps 1.2 palette, '' "
        "using 1:2:(sprintf('%d',$3)) with labels offset 0.8,0.5 font ',8'\n",
        name, plot::quote(f));
  }
  gp += "unset multiplot\n";
  io::write_file_atomic(out / "mds.csv", mds_csv);
  if (!clusters.empty()) {
    io::write_file_atomic(out / "mds.gp", gp);
    plot::run_gnuplot(out / "mds.gp");
  }
}

}  // namespace headcount::analysis
