#include "headcount/analysis/align_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "headcount/analysis/head_stats.h"
#include "headcount/analysis/head_table.h"
#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/common/plot.h"
#include "headcount/run/checkpoint.h"

namespace headcount::analysis {

using model::AttentionType;
using ojson = nlohmann::ordered_json;

AlignInputs read_align_inputs(const AnalyzeOptions& options, const std::string& target,
                              const std::string& links_file) {
  const auto info = run::read_checkpoint_info(options.checkpoint);
  const auto& d = info.config.data;
  const std::string& split = options.split;
  AlignInputs in;
  in.targets_file = target == "kjv" ? data_path(d, split + ".kjv.en")
                                    : data_path(d, split == "dev" ? d.dev_tgt : d.test_tgt);
  in.links_file = !links_file.empty()
                      ? fs::path(links_file)
                      : data_path(d, split + (target == "kjv" ? ".kjv.links" : ".links"));
  HC_CHECK(fs::exists(in.links_file),
           "{}: no gold word links (`headcount data bible --out {}` writes them for the default "
           "corpus; or give --links FILE)",
           in.links_file.string(), d.dir);
  in.targets = io::read_lines(in.targets_file);
  in.links = data::read_links(in.links_file);
  HC_CHECK(in.links.size() == in.targets.size(), "{} has {} lines but {} has {}: they must match",
           in.links_file.string(), in.links.size(), in.targets_file.string(), in.targets.size());
  return in;
}

namespace {

// The best of p and q (by precision, among aligners that predicted anything), with its
// convention; the first aligner when none did.
BestAligner best_aligner(const std::vector<AlignCounts>& p, const std::vector<AlignCounts>& q) {
  BestAligner b;
  double bp = -1;
  for (size_t j = 0; j < p.size(); ++j) {
    if (p[j].predicted > 0 && p[j].precision() > bp) {
      bp = p[j].precision();
      b.index = j;
      b.input = false;
    }
    if (q[j].predicted > 0 && q[j].precision() > bp) {
      bp = q[j].precision();
      b.index = j;
      b.input = true;
    }
  }
  if (!p.empty()) b.counts = b.input ? q[b.index] : p[b.index];
  return b;
}

double best_precision(const AlignmentResult& r, size_t j) {
  return std::max(r.predict[j].precision(), r.input[j].precision());
}

AlignKept kept_aligners(const AlignReport& rep, const std::string& run) {
  const auto& r = rep.result;
  AlignKept k;
  k.run = run;
  std::vector<double> x, y;
  for (size_t j = 0; j < r.heads.size(); ++j)
    if (!std::isnan(rep.removal_step[j]))
      x.push_back(best_precision(r, j)), y.push_back(rep.removal_step[j]);
  k.spearman = spearman_of_three_or_more(x, y);
  for (size_t j = 0; j < r.heads.size(); ++j) {
    if (std::isnan(rep.removal_step[j])) continue;
    const bool is_kept = rep.removal_step[j] > rep.order->last;
    (is_kept ? k.kept : k.removed) += 1;
    if (rep.aligns[j]) (is_kept ? k.kept_aligning : k.removed_aligning) += 1;
    if (is_kept) k.kept_heads.push_back({r.heads[j].label(), best_precision(r, j), rep.aligns[j]});
  }
  return k;
}

AlignRecord align_record(const Analyzer& an, const AnalyzeOptions& options, const AlignInputs& in,
                         const AlignReport& rep, double margin) {
  const auto& r = rep.result;
  AlignRecord rec;
  rec.checkpoint = options.checkpoint.string();
  rec.split = options.split;
  rec.target = in.targets_file.string();
  rec.links = in.links_file.string();
  rec.sentences = r.sentences;
  rec.skipped = r.unmatched;
  rec.target_words = r.target_words;
  rec.linked_words = r.linked_words;
  std::tie(rec.baseline_name, rec.baseline) = r.baseline.best();
  if (!r.heads.empty()) {
    rec.best_head = best_aligner(r.predict, r.input);
    rec.best_head_label = r.heads[rec.best_head->index].label();
    rec.best_layer = best_aligner(r.layer_predict, r.layer_input);
  }
  const auto& per_layer = an.architecture().heads(AttentionType::kEncDec);
  for (size_t l = 0; l < r.layer_predict.size(); ++l)
    rec.layers.push_back({l, per_layer[l], r.layer_predict[l], r.layer_input[l]});
  rec.margin = margin;
  rec.aligning_heads = std::count(rep.aligns.begin(), rep.aligns.end(), true);
  return rec;
}

}  // namespace

AlignReport align_report(Analyzer& an, const AnalyzeOptions& options, const AlignInputs& in,
                         const std::string& run, double margin) {
  AlignReport rep;
  if (!run.empty()) rep.order = read_removal_order(run, an.heads(), options.checkpoint.string());
  rep.result = an.alignment(in.targets, in.links);
  const auto& r = rep.result;
  HC_CHECK(r.sentences > 0,
           "no sentence could be scored: the subword pieces of {} and of the source never spell "
           "their words",
           in.targets_file.string());
  rep.removal_step = removal_steps(rep.order, an.heads(), r.heads);
  const double base = r.baseline.best().second.precision();
  for (size_t j = 0; j < r.heads.size(); ++j)
    rep.aligns.push_back(best_precision(r, j) >= base + margin);
  rep.record = align_record(an, options, in, rep, margin);
  if (rep.order) rep.record.kept = kept_aligners(rep, run);
  return rep;
}

namespace {

ojson counts_json(const AlignCounts& c) {
  return ojson{{"precision", c.precision()}, {"recall", c.recall()}, {"aer", c.aer()}};
}
const char* query_name(bool input) {
  return input ? "input" : "predict";
}

// Precision per head, both query conventions: two panels of decoder layers x heads.
std::vector<plot::Panel> precision_panels(const AlignmentResult& r,
                                          const std::vector<int64_t>& per_layer) {
  std::vector<plot::Panel> panels;
  for (int conv = 0; conv < 2; ++conv) {
    plot::Panel p;
    p.title = conv == 0 ? "predicting the word" : "reading the word (shift)";
    p.values.assign(per_layer.size(), {});
    int64_t width = 0;
    for (auto h : per_layer) width = std::max(width, h);
    for (auto& row : p.values) row.assign(width, std::nan(""));
    for (size_t j = 0; j < r.heads.size(); ++j)
      p.values[r.heads[j].layer][r.heads[j].head] =
          (conv == 0 ? r.predict[j] : r.input[j]).precision();
    panels.push_back(p);
  }
  return panels;
}

void write_align_tables(const fs::path& out, const AlignReport& rep) {
  const auto& r = rep.result;
  std::string csv = fmt::format(
      "attention,layer,head,precision,recall,aer,precision_input,recall_input,aer_input,aligns{}\n",
      rep.order ? ",removal_step,kept" : "");
  for (size_t j = 0; j < r.heads.size(); ++j) {
    const auto &p = r.predict[j], &q = r.input[j];
    csv += fmt::format("{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{}", head_columns(r.heads[j]),
                       p.precision(), p.recall(), p.aer(), q.precision(), q.recall(), q.aer(),
                       rep.aligns[j] ? 1 : 0);
    if (rep.order) csv += removal_columns(*rep.order, rep.removal_step[j]);
    csv += "\n";
  }
  io::write_file_atomic(out / "align.csv", csv);
  std::string lc = "layer,heads,precision,recall,aer,precision_input,recall_input,aer_input\n";
  for (const auto& l : rep.record.layers) {
    const auto &p = l.predict, &q = l.input;
    lc += fmt::format("{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f}\n", l.layer, l.heads,
                      p.precision(), p.recall(), p.aer(), q.precision(), q.recall(), q.aer());
  }
  io::write_file_atomic(out / "align_layers.csv", lc);
  std::string bc = "baseline,precision,recall,aer\n";
  for (const auto& [k, c] : r.baseline.offset)
    bc += fmt::format("offset {:+d},{:.4f},{:.4f},{:.4f}\n", k, c.precision(), c.recall(), c.aer());
  bc += fmt::format("diagonal,{:.4f},{:.4f},{:.4f}\n", r.baseline.diagonal.precision(),
                    r.baseline.diagonal.recall(), r.baseline.diagonal.aer());
  io::write_file_atomic(out / "align_baseline.csv", bc);
}

}  // namespace

void write_align_record(const fs::path& file, const AlignRecord& r) {
  ojson j;
  j["checkpoint"] = r.checkpoint;
  j["split"] = r.split;
  j["target"] = r.target;
  j["links"] = r.links;
  j["sentences"] = r.sentences;
  j["skipped_pieces_do_not_spell_words"] = r.skipped;
  j["target_words"] = r.target_words;
  j["linked_target_words"] = r.linked_words;
  j["baseline"] = counts_json(r.baseline);
  j["baseline"]["name"] = r.baseline_name;
  if (r.best_head) {
    j["best_head"] = counts_json(r.best_head->counts);
    j["best_head"]["head"] = r.best_head_label;
    j["best_head"]["query"] = query_name(r.best_head->input);
    j["best_layer"] = counts_json(r.best_layer->counts);
    j["best_layer"]["layer"] = r.best_layer->index;
    j["best_layer"]["query"] = query_name(r.best_layer->input);
  }
  ojson layers = ojson::array();
  for (const auto& l : r.layers)
    layers.push_back({{"layer", l.layer},
                      {"heads", l.heads},
                      {"predict", counts_json(l.predict)},
                      {"input", counts_json(l.input)}});
  j["layers"] = layers;
  j["margin"] = r.margin;
  j["aligning_heads"] = r.aligning_heads;
  if (r.kept) {
    j["run"] = r.kept->run;
    j["spearman_precision_vs_removal_step"] = number_or_null(r.kept->spearman);
    ojson kept = ojson::array();
    for (const auto& k : r.kept->kept_heads)
      kept.push_back({{"head", k.head}, {"precision", k.precision}, {"aligns", k.aligns}});
    j["kept_heads"] = kept;
    j["kept_aligning"] = r.kept->kept_aligning;
    j["kept"] = r.kept->kept;
    j["removed_aligning"] = r.kept->removed_aligning;
    j["removed"] = r.kept->removed;
  }
  io::write_file_atomic(file, j.dump(2) + "\n");
}

void write_align_report(const fs::path& out, const Analyzer& an, const AlignReport& rep) {
  write_align_tables(out, rep);
  plot::ColourScale unit_scale;
  unit_scale.lo = 0;
  unit_scale.hi = 1;
  plot::heatmaps(out / "align.png",
                 fmt::format("Encoder-decoder heads as aligners: precision against gold links "
                             "(best baseline {} {:.3f})",
                             rep.record.baseline_name, rep.record.baseline.precision()),
                 precision_panels(rep.result, an.architecture().heads(AttentionType::kEncDec)),
                 "precision", unit_scale);
  write_align_record(AnalysisFolder{out}.align(), rep.record);
}

}  // namespace headcount::analysis
