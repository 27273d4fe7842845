// headcount analyze: head importance (Michel et al.), ablations, what heads do (Voita et al.,
// Clark et al.), head similarity.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "headcount/analysis/analyzer.h"
#include "headcount/analysis/compare.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/plot.h"
#include "headcount/common/text.h"
#include "headcount/data/links.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/run_folder.h"

namespace headcount::cli {
namespace {

using analysis::HeadId;
using model::AttentionType;

struct AnalyzeArgs {
  analysis::AnalyzeOptions options;
  std::string out;
  bool normalize = false;
  std::string conllu;  // heads: dependency parses of the split's source sentences
  std::vector<std::string> relations{"nsubj", "obj", "amod", "advmod"};
  double margin = 0.10;
  double min_arcs = 20;
};

void add_common(CLI::App* cmd, AnalyzeArgs& a) {
  cmd->add_option("--checkpoint", a.options.checkpoint, "Checkpoint folder (full or pruned)")
      ->required()
      ->check(checkpoint_folder())
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--split", a.options.split, "dev or test of the checkpoint's corpus")
      ->check(CLI::IsMember({"dev", "test"}))
      ->capture_default_str();
  cmd->add_option("--sentences", a.options.sentences, "The first N sentences (0: all)")
      ->check(integer_in(0, INT32_MAX))
      ->capture_default_str();
  cmd->add_option("--out", a.out, "Folder for the CSV files and plots")->required();
  cmd->add_option("--set", a.options.sets,
                  "Override a config key of the checkpoint (threads.*, decode.*, device)")
      ->type_name("KEY=VALUE");
}

// Values per head as one panel per attention type (layers x heads).
std::vector<plot::Panel> panels(const analysis::Analyzer& an, const std::vector<double>& v) {
  std::vector<plot::Panel> out;
  const auto& heads = an.heads();
  for (auto t : model::kAttentionTypes) {
    const auto& per_layer = an.architecture().heads(t);
    if (per_layer.empty()) continue;
    int64_t width = 0;
    for (auto h : per_layer) width = std::max(width, h);
    if (width == 0) continue;
    plot::Panel p;
    p.title = model::attention_name(t);
    p.values.assign(per_layer.size(), std::vector<double>(width, std::nan("")));
    for (size_t i = 0; i < heads.size(); ++i)
      if (heads[i].type == t) p.values[heads[i].layer][heads[i].head] = v[i];
    out.push_back(p);
  }
  return out;
}

std::string head_cols(const HeadId& h) {
  return fmt::format("{},{},{}", model::attention_name(h.type), h.layer, h.head);
}

void run_importance(const AnalyzeArgs& a) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto& heads = an.heads();
  log::info("importance of {} heads over {} {} sentences", heads.size(), a.options.sentences,
            a.options.split);
  const auto score = an.importance(a.normalize);
  std::string csv = "attention,layer,head,importance\n";
  for (size_t i = 0; i < heads.size(); ++i)
    csv += fmt::format("{},{:.6g}\n", head_cols(heads[i]), score[i]);
  io::write_file_atomic(out / "importance.csv", csv);
  plot::heatmaps(out / "importance.png",
                 fmt::format("Head importance I_h{}", a.normalize ? " (layer-normalised)" : ""),
                 panels(an, score), "I_h");
  // The pruning curve: mask the least important 0%, 10%, ..., 90% (all heads, then each type).
  std::string curve = "set,fraction,masked,bleu\n";
  std::vector<std::pair<std::string, std::vector<size_t>>> sets = {{"all", {}}};
  for (size_t i = 0; i < heads.size(); ++i) sets[0].second.push_back(i);
  for (auto t : model::kAttentionTypes) {
    std::vector<size_t> m;
    for (size_t i = 0; i < heads.size(); ++i)
      if (heads[i].type == t) m.push_back(i);
    if (!m.empty()) sets.emplace_back(model::attention_name(t), m);
  }
  std::string dat;
  for (auto& [name, members] : sets) {
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t x, size_t y) { return score[x] < score[y]; });
    dat += fmt::format("# {}\n", name);
    for (int k = 0; k <= 9; ++k) {
      const size_t n = members.size() * k / 10;
      std::vector<HeadId> masked;
      for (size_t i = 0; i < n; ++i) masked.push_back(heads[members[i]]);
      const double b = an.bleu(masked);
      log::info("pruning curve {}: {}% ({} heads) masked: BLEU {:.2f}", name, k * 10, n, b);
      curve += fmt::format("{},{:.1f},{},{:.4f}\n", name, k / 10.0, n, b);
      dat += fmt::format("{} {}\n", k * 10, b);
    }
    dat += "\n\n";
  }
  io::write_file_atomic(out / "pruning_curve.csv", curve);
  io::write_file_atomic(out / "pruning_curve.dat", dat);
  std::string gp = "set terminal pngcairo noenhanced size 800,560 font ',11'\n";
  gp += fmt::format("set output {}\n", plot::quote(out / "pruning_curve.png"));
  gp += "set xlabel 'heads masked, least important first (%)'\nset ylabel 'BLEU'\nset grid\n";
  gp += "set key bottom left\nplot ";
  for (size_t k = 0; k < sets.size(); ++k) {
    gp += fmt::format("{}{} index {} using 1:2 with linespoints title '{}'", k ? ", \\\n  " : "",
                      plot::quote(out / "pruning_curve.dat"), k, sets[k].first);
  }
  gp += "\n";
  io::write_file_atomic(out / "pruning_curve.gp", gp);
  plot::run_gnuplot(out / "pruning_curve.gp");
  std::printf("wrote %s/{importance.csv,pruning_curve.csv} and plots\n", out.c_str());
}

void run_ablate(const AnalyzeArgs& a) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto& heads = an.heads();
  const double base = an.bleu({});
  log::info("BLEU with every head: {:.2f}; masking each of {} heads in turn", base, heads.size());
  std::vector<double> change;
  std::string csv = "attention,layer,head,bleu,change\n";
  for (size_t i = 0; i < heads.size(); ++i) {
    const double b = an.bleu({heads[i]});
    change.push_back(b - base);
    csv += fmt::format("{},{:.4f},{:+.4f}\n", head_cols(heads[i]), b, b - base);
    log::info("[{}/{}] {} masked: BLEU {:.2f} ({:+.2f})", i + 1, heads.size(), heads[i].label(), b,
              b - base);
  }
  io::write_file_atomic(out / "ablate.csv", csv);
  plot::heatmaps(out / "ablate.png",
                 fmt::format("BLEU change when one head is masked (base {:.2f})", base),
                 panels(an, change), "BLEU change");
  // Michel's Table 2: keep only one head in a layer (the best one).
  std::string keep = "attention,layer,heads,best_head,bleu,change\n";
  for (auto t : model::kAttentionTypes) {
    const auto& per_layer = an.architecture().heads(t);
    for (size_t l = 0; l < per_layer.size(); ++l) {
      if (per_layer[l] < 2) continue;
      double best = -1;
      int64_t best_head = -1;
      for (int64_t keep_h = 0; keep_h < per_layer[l]; ++keep_h) {
        std::vector<HeadId> masked;
        for (int64_t h = 0; h < per_layer[l]; ++h)
          if (h != keep_h) masked.push_back({t, static_cast<int64_t>(l), h});
        const double b = an.bleu(masked);
        if (b > best) best = b, best_head = keep_h;
      }
      keep += fmt::format("{},{},{},{},{:.4f},{:+.4f}\n", model::attention_name(t), l, per_layer[l],
                          best_head, best, best - base);
      log::info("{} layer {}: best single head {} gives BLEU {:.2f} ({:+.2f})",
                model::attention_name(t), l, best_head, best, best - base);
    }
  }
  io::write_file_atomic(out / "keep_one.csv", keep);
  std::printf("base BLEU %.2f; wrote %s/{ablate.csv,keep_one.csv} and plots\n", base, out.c_str());
}

void run_heads(const AnalyzeArgs& a) {
  // Read the parses before the (slow) model work, so that a bad file fails at once.
  std::optional<std::vector<analysis::DepSentence>> parses;
  if (!a.conllu.empty()) {
    parses = analysis::read_conllu(a.conllu);
    HC_CHECK(!parses->empty(), "{}: no sentence in the CoNLL-U file", a.conllu);
  }
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto& heads = an.heads();
  const auto stats = an.head_stats();
  // Syntactic functions of the encoder self-attention heads.
  std::map<std::tuple<int, int64_t, int64_t>, analysis::SyntacticVerdict> verdicts;
  std::vector<double> gain(heads.size(), std::nan(""));
  if (parses) {
    const auto r = an.syntax(*parses);
    log::info("syntax: {} sentences matched their parses, {} skipped (pieces and words differ)",
              r.sentences, r.unmatched);
    std::string sc =
        "attention,layer,head,relation,direction,arcs,accuracy,baseline,baseline_offset,gain\n";
    for (size_t k = 0; k < r.heads.size(); ++k) {
      for (const auto& [rel, _] : r.baseline.counts)
        for (auto d :
             {analysis::DepDirection::kDependentToHead, analysis::DepDirection::kHeadToDependent}) {
          const auto it = r.stats[k].relations.find(rel);
          if (it == r.stats[k].relations.end()) continue;
          const auto& c = it->second[static_cast<int>(d)];
          const auto [off, base] = r.baseline.best(rel, d);
          sc += fmt::format("{},{},{},{},{:.4f},{:.4f},{},{:+.4f}\n", head_cols(r.heads[k]), rel,
                            analysis::direction_name(d), c.total, c.accuracy(), base, off,
                            c.accuracy() - base);
        }
      const auto v =
          analysis::syntactic_verdict(r.stats[k], r.baseline, a.relations, a.margin, a.min_arcs);
      const auto& h = r.heads[k];
      verdicts[{static_cast<int>(h.type), h.layer, h.head}] = v;
    }
    io::write_file_atomic(out / "syntax.csv", sc);
    std::string bc = "relation,direction,arcs,best_offset,accuracy\n";
    for (const auto& [rel, _] : r.baseline.counts)
      for (auto d :
           {analysis::DepDirection::kDependentToHead, analysis::DepDirection::kHeadToDependent}) {
        const auto [off, acc] = r.baseline.best(rel, d);
        bc += fmt::format("{},{},{},{},{:.4f}\n", rel, analysis::direction_name(d),
                          r.baseline.arcs(rel, d), off, acc);
      }
    io::write_file_atomic(out / "syntax_baseline.csv", bc);
  }
  std::string csv =
      "attention,layer,head,confidence,entropy,attention_eos,attention_prev,attention_same,"
      "attention_next,top_offset,top_offset_share,positional,rare_fraction,syntactic,"
      "syntactic_relation,syntactic_accuracy,syntactic_baseline,function\n";
  std::vector<double> conf, ent;
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto& s = stats[i];
    const auto [off, share] = s.top_offset();
    const bool self = heads[i].type != AttentionType::kEncDec;
    const auto v = verdicts.find({static_cast<int>(heads[i].type), heads[i].layer, heads[i].head});
    const bool has_syntax = v != verdicts.end() && !v->second.relation.empty();
    const bool syntactic = has_syntax && v->second.syntactic;
    if (has_syntax) gain[i] = v->second.accuracy - v->second.baseline;
    const auto fn = analysis::head_functions(s, self, syntactic);
    csv += fmt::format(
        "{},{:.4f},{:.4f},{:.4f},{},{},{},{},{},{},{:.4f},{},{},{},{},{}\n", head_cols(heads[i]),
        s.confidence(), s.entropy(), s.attention_to_eos(),
        self ? fmt::format("{:.4f}", s.attention_prev()) : "",
        self ? fmt::format("{:.4f}", s.attention_same()) : "",
        self ? fmt::format("{:.4f}", s.attention_next()) : "", self ? std::to_string(off) : "",
        self ? fmt::format("{:.4f}", share) : "", fn.positional ? 1 : 0, s.rare_fraction(),
        has_syntax ? (syntactic ? "1" : "0") : "",
        has_syntax ? v->second.relation + " " + analysis::direction_name(v->second.direction) : "",
        has_syntax ? fmt::format("{:.4f}", v->second.accuracy) : "",
        has_syntax ? fmt::format("{:.4f}", v->second.baseline) : "", fn.label());
    conf.push_back(s.confidence());
    ent.push_back(s.entropy());
  }
  io::write_file_atomic(out / "heads.csv", csv);
  plot::heatmaps(out / "confidence.png", "Head confidence (mean max weight, EOS excluded)",
                 panels(an, conf), "confidence");
  plot::heatmaps(out / "entropy.png", "Attention entropy (nats)", panels(an, ent), "entropy");
  if (parses) {
    std::vector<plot::Panel> p;
    for (auto& panel : panels(an, gain))
      if (panel.title == model::attention_name(AttentionType::kEncSelf)) p.push_back(panel);
    if (!p.empty())
      plot::heatmaps(out / "syntax.png",
                     fmt::format("Best syntactic accuracy minus its fixed-offset baseline ({})",
                                 fmt::join(a.relations, ", ")),
                     p, "accuracy gain");
  }
  std::printf("wrote %s/heads.csv%s and plots\n", out.c_str(),
              parses ? ", syntax.csv, syntax_baseline.csv" : "");
}

void run_cluster(const AnalyzeArgs& a) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto& heads = an.heads();
  std::string mds_csv = "attention,layer,head,x,y\n";
  std::string gp = "set terminal pngcairo noenhanced size 1300,460 font ',10'\n";
  gp += fmt::format("set output {}\n", plot::quote(out / "mds.png"));
  gp +=
      "set multiplot layout 1,3 title 'Heads by Jensen-Shannon distance (classical MDS; label: "
      "layer)'\nset key off\nset grid\n";
  int panels_drawn = 0;
  for (auto t : model::kAttentionTypes) {
    std::vector<size_t> members;
    for (size_t i = 0; i < heads.size(); ++i)
      if (heads[i].type == t) members.push_back(i);
    if (members.size() < 3) continue;
    const auto d = an.js_distances(t);
    std::string m;
    for (int64_t i = 0; i < d.size(0); ++i) {
      std::vector<std::string> row;
      for (int64_t j = 0; j < d.size(1); ++j)
        row.push_back(fmt::format("{:.6g}", d[i][j].item<double>()));
      m += fmt::format("{}\n", fmt::join(row, ","));
    }
    io::write_file_atomic(out / fmt::format("js_{}.csv", model::attention_name(t)), m);
    const auto x = analysis::classical_mds(d, 2);
    std::string dat;
    for (size_t k = 0; k < members.size(); ++k) {
      const auto& h = heads[members[k]];
      const double px = x[k][0].item<double>(), py = x[k][1].item<double>();
      mds_csv += fmt::format("{},{:.6g},{:.6g}\n", head_cols(h), px, py);
      dat += fmt::format("{} {} {} {}\n", px, py, h.layer, h.head);
    }
    const fs::path f = out / fmt::format("mds_{}.dat", model::attention_name(t));
    io::write_file_atomic(f, dat);
    gp += fmt::format(
        "set title '{}'\nplot {} using 1:2:3 with points pt 7 ps 1.2 palette, '' "
        "using 1:2:(sprintf('%d',$3)) with labels offset 0.8,0.5 font ',8'\n",
        model::attention_name(t), plot::quote(f));
    ++panels_drawn;
  }
  gp += "unset multiplot\n";
  io::write_file_atomic(out / "mds.csv", mds_csv);
  if (panels_drawn > 0) {
    io::write_file_atomic(out / "mds.gp", gp);
    plot::run_gnuplot(out / "mds.gp");
  }
  std::printf("wrote %s/{js_*.csv,mds.csv} and plots\n", out.c_str());
}

// The removal step of each of `of` in a prune run's order (NaN: a head the run did not gate);
// `all` are the analysis's heads, which the order indexes.
std::vector<double> removal_steps(const analysis::RemovalOrder& order,
                                  const std::vector<HeadId>& all, const std::vector<HeadId>& of) {
  std::map<std::tuple<int, int64_t, int64_t>, double> by_head;
  for (size_t k = 0; k < order.gated.size(); ++k) {
    const auto& h = all[order.gated[k]];
    by_head[{static_cast<int>(h.type), h.layer, h.head}] = order.step[k];
  }
  std::vector<double> out;
  for (const auto& h : of) {
    const auto it = by_head.find({static_cast<int>(h.type), h.layer, h.head});
    out.push_back(it == by_head.end() ? std::nan("") : it->second);
  }
  return out;
}

// The CSV columns removal_step,kept of one head (both empty for a head the run did not gate;
// no step for a kept head).
std::string removal_columns(const analysis::RemovalOrder& order, double step) {
  if (std::isnan(step)) return ",,";
  if (step > order.last) return ",,1";
  return fmt::format(",{:g},0", step);
}

// LRP head relevance (Voita et al. 2019 §4) beside confidence, I_h and (with a prune run) the
// removal order.
void run_relevance(const AnalyzeArgs& a, double eps, const std::string& run_dir) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto& heads = an.heads();
  std::optional<analysis::RemovalOrder> order;
  if (!run_dir.empty())
    order = analysis::read_removal_order(run_dir, heads, a.options.checkpoint.string());
  const auto rel = an.relevance(eps);
  const auto stats = an.head_stats();
  const auto imp = an.importance(false);
  std::vector<double> conf;
  for (const auto& s : stats) conf.push_back(s.confidence());
  const auto step =
      order ? removal_steps(*order, heads, heads) : std::vector<double>(heads.size(), std::nan(""));
  // Spearman over the heads of one type (or all), skipping heads without a value.
  auto rho = [&](const std::vector<double>& other, std::optional<AttentionType> type) {
    std::vector<double> x, y;
    for (size_t i = 0; i < heads.size(); ++i) {
      if (type && heads[i].type != *type) continue;
      if (std::isnan(rel.share[i]) || std::isnan(other[i])) continue;
      x.push_back(rel.share[i]);
      y.push_back(other[i]);
    }
    return x.size() >= 3 ? nlohmann::ordered_json(analysis::spearman(x, y))
                         : nlohmann::ordered_json(nullptr);
  };
  auto rhos = [&](const std::vector<double>& other) {
    nlohmann::ordered_json j;
    j["all"] = rho(other, std::nullopt);
    for (auto t : model::kAttentionTypes) j[model::attention_name(t)] = rho(other, t);
    return j;
  };
  std::string csv = fmt::format(
      "attention,layer,head,relevance,relevance_token_mean,raw_relevance,confidence,"
      "importance{}\n",
      order ? ",removal_step,kept" : "");
  for (size_t i = 0; i < heads.size(); ++i) {
    csv += fmt::format("{},{:.6g},{:.6g},{:.6g},{:.4f},{:.6g}", head_cols(heads[i]), rel.share[i],
                       rel.token_share[i], rel.raw[i], conf[i], imp[i]);
    if (order) csv += removal_columns(*order, step[i]);
    csv += "\n";
  }
  io::write_file_atomic(out / "relevance.csv", csv);
  plot::heatmaps(out / "relevance.png",
                 "LRP head relevance (share of the layer's head relevance to the top-1 logit)",
                 panels(an, rel.share), "relevance");
  nlohmann::ordered_json j;
  j["checkpoint"] = a.options.checkpoint.string();
  j["split"] = a.options.split;
  j["sentences"] = rel.sentences;
  j["target_tokens"] = rel.tokens;
  j["epsilon"] = eps;
  j["source_share_of_input_relevance"] = rel.source_share;
  j["top_logit_share_reaching_embeddings"] = rel.reached_inputs;
  j["spearman_relevance_vs_confidence"] = rhos(conf);
  j["spearman_relevance_vs_importance"] = rhos(imp);
  if (order) {
    j["run"] = run_dir;
    j["spearman_relevance_vs_removal_step"] = rhos(step);
    // Mean relevance of the heads L0 kept and of those it removed, per attention type.
    nlohmann::ordered_json kr;
    for (auto t : model::kAttentionTypes) {
      double ks = 0, rs = 0;
      int kn = 0, rn = 0;
      for (size_t k = 0; k < order->gated.size(); ++k) {
        const size_t i = order->gated[k];
        if (heads[i].type != t || std::isnan(rel.share[i])) continue;
        if (order->kept(k)) {
          ks += rel.share[i];
          ++kn;
        } else {
          rs += rel.share[i];
          ++rn;
        }
      }
      if (kn + rn == 0) continue;
      kr[model::attention_name(t)] = {
          {"kept", kn},
          {"removed", rn},
          {"mean_relevance_kept", kn ? nlohmann::ordered_json(ks / kn) : nullptr},
          {"mean_relevance_removed", rn ? nlohmann::ordered_json(rs / rn) : nullptr}};
    }
    j["kept_vs_removed"] = kr;
  }
  io::write_file_atomic(out / "relevance.json", j.dump(2) + "\n");
  auto show = [](const nlohmann::ordered_json& v) {
    return v.is_number() ? fmt::format("{:+.3f}", v.get<double>()) : std::string("-");
  };
  std::printf("LRP head relevance over %lld target tokens (%lld %s sentences, eps %g)\n",
              static_cast<long long>(rel.tokens), static_cast<long long>(rel.sentences),
              a.options.split.c_str(), eps);
  std::printf(
      "  source share of the input relevance %.3f; top logit reaching the embeddings %.3f\n",
      rel.source_share, rel.reached_inputs);
  std::printf("  Spearman with relevance   %-10s %-10s %-10s %-10s\n", "all", "enc_self",
              "dec_self", "enc_dec");
  auto line = [&](const char* what, const nlohmann::ordered_json& r) {
    std::printf("  %-25s %-10s %-10s %-10s %-10s\n", what, show(r["all"]).c_str(),
                show(r["enc_self"]).c_str(), show(r["dec_self"]).c_str(),
                show(r["enc_dec"]).c_str());
  };
  line("confidence", j["spearman_relevance_vs_confidence"]);
  line("importance I_h", j["spearman_relevance_vs_importance"]);
  if (order) line("removal step", j["spearman_relevance_vs_removal_step"]);
  std::printf("wrote %s/{relevance.csv,relevance.json} and plots\n", out.c_str());
}

// Encoder-decoder heads as word aligners against gold links (for the default corpus, from the
// Strong's numbers of the SWORD modules), and whether L0 keeps the heads that align.
void run_align(const AnalyzeArgs& a, const std::string& target, const std::string& links_file,
               const std::string& run_dir, double margin) {
  const auto info = run::read_checkpoint_info(a.options.checkpoint);
  const auto& d = info.config.data;
  const std::string& split = a.options.split;
  const fs::path tgt_path = target == "kjv" ? data_path(d, split + ".kjv.en")
                                            : data_path(d, split == "dev" ? d.dev_tgt : d.test_tgt);
  const fs::path links_path =
      !links_file.empty() ? fs::path(links_file)
                          : data_path(d, split + (target == "kjv" ? ".kjv.links" : ".links"));
  HC_CHECK(fs::exists(links_path),
           "{}: no gold word links (`headcount data bible --out {}` writes them for the default "
           "corpus; or give --links FILE)",
           links_path.string(), d.dir);
  const auto targets = io::read_lines(tgt_path);
  const auto links = data::read_links(links_path);
  HC_CHECK(links.size() == targets.size(), "{} has {} lines but {} has {}: they must match",
           links_path.string(), links.size(), tgt_path.string(), targets.size());
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  std::optional<analysis::RemovalOrder> order;
  if (!run_dir.empty())
    order = analysis::read_removal_order(run_dir, an.heads(), a.options.checkpoint.string());
  const auto r = an.alignment(targets, links);
  HC_CHECK(r.sentences > 0,
           "no sentence could be scored: the subword pieces of {} and of the source never spell "
           "their words",
           tgt_path.string());
  const auto best_baseline = r.baseline.best();
  const std::string& base_name = best_baseline.first;
  const analysis::AlignCounts& base = best_baseline.second;
  // Removal steps of the enc-dec heads (NaN: not gated by the run).
  const auto step = order ? removal_steps(*order, an.heads(), r.heads)
                          : std::vector<double>(r.heads.size(), std::nan(""));
  auto best_of = [&](size_t j) {
    return std::max(r.predict[j].precision(), r.input[j].precision());
  };
  auto aligns = [&](size_t j) { return best_of(j) >= base.precision() + margin; };
  std::string csv = fmt::format(
      "attention,layer,head,precision,recall,aer,precision_input,recall_input,aer_input,aligns{}\n",
      order ? ",removal_step,kept" : "");
  for (size_t j = 0; j < r.heads.size(); ++j) {
    const auto &p = r.predict[j], &q = r.input[j];
    csv += fmt::format("{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{}", head_cols(r.heads[j]),
                       p.precision(), p.recall(), p.aer(), q.precision(), q.recall(), q.aer(),
                       aligns(j) ? 1 : 0);
    if (order) csv += removal_columns(*order, step[j]);
    csv += "\n";
  }
  io::write_file_atomic(out / "align.csv", csv);
  std::string lc = "layer,heads,precision,recall,aer,precision_input,recall_input,aer_input\n";
  const auto& per_layer = an.architecture().heads(AttentionType::kEncDec);
  for (size_t l = 0; l < r.layer_predict.size(); ++l) {
    const auto &p = r.layer_predict[l], &q = r.layer_input[l];
    lc += fmt::format("{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f}\n", l, per_layer[l],
                      p.precision(), p.recall(), p.aer(), q.precision(), q.recall(), q.aer());
  }
  io::write_file_atomic(out / "align_layers.csv", lc);
  std::string bc = "baseline,precision,recall,aer\n";
  for (const auto& [k, c] : r.baseline.offset)
    bc += fmt::format("offset {:+d},{:.4f},{:.4f},{:.4f}\n", k, c.precision(), c.recall(), c.aer());
  bc += fmt::format("diagonal,{:.4f},{:.4f},{:.4f}\n", r.baseline.diagonal.precision(),
                    r.baseline.diagonal.recall(), r.baseline.diagonal.aer());
  io::write_file_atomic(out / "align_baseline.csv", bc);
  // Heat maps: precision per head, both query conventions.
  std::vector<plot::Panel> panels_out;
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
    panels_out.push_back(p);
  }
  plot::ColourScale unit_scale;
  unit_scale.lo = 0;
  unit_scale.hi = 1;
  plot::heatmaps(out / "align.png",
                 fmt::format("Encoder-decoder heads as aligners: precision against gold links "
                             "(best baseline {} {:.3f})",
                             base_name, base.precision()),
                 panels_out, "precision", unit_scale);
  // The best single head and the best layer, each with its better convention.
  auto best_index = [](const std::vector<analysis::AlignCounts>& p,
                       const std::vector<analysis::AlignCounts>& q) {
    size_t bi = 0;
    bool input = false;
    double bp = -1;
    for (size_t j = 0; j < p.size(); ++j) {
      if (p[j].predicted > 0 && p[j].precision() > bp) bp = p[j].precision(), bi = j, input = false;
      if (q[j].predicted > 0 && q[j].precision() > bp) bp = q[j].precision(), bi = j, input = true;
    }
    return std::make_pair(bi, input);
  };
  auto counts_json = [](const analysis::AlignCounts& c) {
    return nlohmann::ordered_json{
        {"precision", c.precision()}, {"recall", c.recall()}, {"aer", c.aer()}};
  };
  nlohmann::ordered_json j;
  j["checkpoint"] = a.options.checkpoint.string();
  j["split"] = split;
  j["target"] = tgt_path.string();
  j["links"] = links_path.string();
  j["sentences"] = r.sentences;
  j["skipped_pieces_do_not_spell_words"] = r.unmatched;
  j["target_words"] = r.target_words;
  j["linked_target_words"] = r.linked_words;
  j["baseline"] = counts_json(base);
  j["baseline"]["name"] = base_name;
  const auto [bh, bh_in] = best_index(r.predict, r.input);
  const auto [bl, bl_in] = best_index(r.layer_predict, r.layer_input);
  if (!r.heads.empty()) {
    j["best_head"] = counts_json(bh_in ? r.input[bh] : r.predict[bh]);
    j["best_head"]["head"] = r.heads[bh].label();
    j["best_head"]["query"] = bh_in ? "input" : "predict";
    j["best_layer"] = counts_json(bl_in ? r.layer_input[bl] : r.layer_predict[bl]);
    j["best_layer"]["layer"] = bl;
    j["best_layer"]["query"] = bl_in ? "input" : "predict";
  }
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (size_t l = 0; l < r.layer_predict.size(); ++l)
    layers.push_back({{"layer", l},
                      {"heads", per_layer[l]},
                      {"predict", counts_json(r.layer_predict[l])},
                      {"input", counts_json(r.layer_input[l])}});
  j["layers"] = layers;
  j["margin"] = margin;
  int64_t n_align = 0;
  for (size_t k = 0; k < r.heads.size(); ++k) n_align += aligns(k) ? 1 : 0;
  j["aligning_heads"] = n_align;
  if (order) {
    j["run"] = run_dir;
    std::vector<double> x, y;
    for (size_t k = 0; k < r.heads.size(); ++k)
      if (!std::isnan(step[k])) x.push_back(best_of(k)), y.push_back(step[k]);
    j["spearman_precision_vs_removal_step"] = x.size() >= 3
                                                  ? nlohmann::ordered_json(analysis::spearman(x, y))
                                                  : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json kept = nlohmann::ordered_json::array();
    int64_t kept_align = 0, removed_align = 0, kept_n = 0, removed_n = 0;
    for (size_t k = 0; k < r.heads.size(); ++k) {
      if (std::isnan(step[k])) continue;
      const bool is_kept = step[k] > order->last;
      (is_kept ? kept_n : removed_n) += 1;
      if (aligns(k)) (is_kept ? kept_align : removed_align) += 1;
      if (is_kept)
        kept.push_back(
            {{"head", r.heads[k].label()}, {"precision", best_of(k)}, {"aligns", aligns(k)}});
    }
    j["kept_heads"] = kept;
    j["kept_aligning"] = kept_align;
    j["kept"] = kept_n;
    j["removed_aligning"] = removed_align;
    j["removed"] = removed_n;
  }
  io::write_file_atomic(out / "align.json", j.dump(2) + "\n");
  std::printf("%lld sentences scored (%lld skipped), %lld of %lld target words linked\n",
              static_cast<long long>(r.sentences), static_cast<long long>(r.unmatched),
              static_cast<long long>(r.linked_words), static_cast<long long>(r.target_words));
  std::printf("best baseline (%s): precision %.3f AER %.3f\n", base_name.c_str(), base.precision(),
              base.aer());
  if (!r.heads.empty()) {
    const auto& hb = bh_in ? r.input[bh] : r.predict[bh];
    const auto& lb = bl_in ? r.layer_input[bl] : r.layer_predict[bl];
    std::printf("best head  %s (%s): precision %.3f AER %.3f\n", r.heads[bh].label().c_str(),
                bh_in ? "input" : "predict", hb.precision(), hb.aer());
    std::printf("best layer %zu (%s, mean of its heads): precision %.3f AER %.3f\n", bl,
                bl_in ? "input" : "predict", lb.precision(), lb.aer());
  }
  std::printf("layer  precision(predict)  precision(input)  AER(predict)  AER(input)\n");
  for (size_t l = 0; l < r.layer_predict.size(); ++l)
    std::printf("%5zu  %18.3f  %16.3f  %12.3f  %10.3f\n", l, r.layer_predict[l].precision(),
                r.layer_input[l].precision(), r.layer_predict[l].aer(), r.layer_input[l].aer());
  std::printf("%lld heads align (precision >= baseline + %.2f)\n", static_cast<long long>(n_align),
              margin);
  if (order)
    std::printf(
        "kept by L0: %lld of %lld aligning heads (%lld of %lld gated kept); Spearman "
        "precision vs removal step %s\n",
        static_cast<long long>(j["kept_aligning"].get<int64_t>()),
        static_cast<long long>(j["kept_aligning"].get<int64_t>() +
                               j["removed_aligning"].get<int64_t>()),
        static_cast<long long>(j["kept"].get<int64_t>()),
        static_cast<long long>(j["kept"].get<int64_t>() + j["removed"].get<int64_t>()),
        j["spearman_precision_vs_removal_step"].is_number()
            ? fmt::format("{:+.3f}", j["spearman_precision_vs_removal_step"].get<double>()).c_str()
            : "-");
  std::printf("wrote %s/{align.csv,align_layers.csv,align_baseline.csv,align.json} and plots\n",
              out.c_str());
}

// A prune run (L0 or Fisher) against Michel et al.'s importance pruning at equal head counts
// (analysis/compare.h); prints the comparison.
void run_compare(const AnalyzeArgs& a, const std::string& run_dir, bool finetune,
                 int finetune_threads, bool export_michel) {
  analysis::CompareOptions c;
  c.run = run_dir;
  c.out = a.out;
  c.normalize = a.normalize;
  c.finetune = finetune;
  c.finetune_threads = finetune_threads;
  c.export_michel = export_michel;
  c.executable = self_executable();
  const auto r = analysis::compare_l0_with_importance(a.options, c);
  const bool fisher = r.method == PruneMethod::kFisher;
  const std::string name = fisher ? "Fisher" : "L0";
  const auto line = [](const std::string& what, double bleu) {
    std::printf("  %-45s%6.2f\n", what.c_str(), bleu);
  };
  std::printf("%zu of %zu gated heads removed by %s (%s)\n", r.removed, r.gated, name.c_str(),
              run_dir.c_str());
  std::printf("BLEU, %d %s sentences, beam %d:\n", a.options.sentences, a.options.split.c_str(),
              a.options.beam);
  line("full model", r.bleu_full);
  line(name + "'s removed heads masked (no fine-tuning)", r.bleu_l0_masked);
  line("Michel: as many least-I_h heads masked", r.bleu_michel_masked);
  if (r.bleu_l0_tuned)
    line(name + (fisher ? " pruned checkpoint (its pruned/ model)"
                        : " pruned checkpoint (after fine-tuning)"),
         *r.bleu_l0_tuned);
  if (r.bleu_michel_tuned) line("Michel pruned, fine-tuned (same budget)", *r.bleu_michel_tuned);
  std::printf("Spearman vs removal step: importance %.3f, confidence %.3f\nwrote %s\n",
              r.spearman_importance, r.spearman_confidence,
              run::RunFolder{c.out}.compare().c_str());
}
}  // namespace

void add_analyze_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "analyze",
      "Head analyses of a checkpoint: importance, ablate, heads, relevance, align, compare, "
      "cluster");
  cmd->require_subcommand(1);
  auto imp = std::make_shared<AnalyzeArgs>();
  auto* i =
      cmd->add_subcommand("importance",
                          "Michel et al.'s gradient importance I_h of every head, and the BLEU of "
                          "masking the least important 0-90% (all heads, and per attention type)");
  add_common(i, *imp);
  i->add_flag("--normalize", imp->normalize, "Divide each layer's scores by their L2 norm");
  i->add_option("--beam", imp->options.beam, "Beam for BLEU (1: greedy)")
      ->check(fits_config_key("decode.beam"))
      ->capture_default_str();
  i->callback([imp] { run_importance(*imp); });
  auto abl = std::make_shared<AnalyzeArgs>();
  auto* b = cmd->add_subcommand("ablate",
                                "BLEU change when each single head is masked, and the "
                                "best single head to keep in each layer");
  add_common(b, *abl);
  b->add_option("--beam", abl->options.beam, "Beam for BLEU (1: greedy)")
      ->check(fits_config_key("decode.beam"))
      ->capture_default_str();
  b->callback([abl] { run_ablate(*abl); });
  auto hd = std::make_shared<AnalyzeArgs>();
  auto* h = cmd->add_subcommand(
      "heads",
      "Per head: confidence, entropy, attention to EOS and neighbours, positional, "
      "rare-token and (with --conllu) syntactic functions");
  add_common(h, *hd);
  h->add_option("--conllu", hd->conllu,
                "Dependency parses (CoNLL-U) of the split's source sentences, in order: "
                "syntactic accuracy of the encoder self-attention heads")
      ->check(CLI::ExistingFile);
  h->add_option("--relations", hd->relations,
                "Relations that make a head syntactic (UD names, subtypes folded)")
      ->delimiter(',')
      ->capture_default_str();
  h->add_option("--margin", hd->margin,
                "A head is syntactic when its accuracy beats the best fixed offset by this much")
      ->check(number_in(-1, 1))  // a difference of two accuracies
      ->capture_default_str();
  h->add_option("--min-arcs", hd->min_arcs, "Relations with fewer arcs are not judged")
      ->check(number_in(0, 1e9))
      ->capture_default_str();
  h->add_option("--exclude-top", hd->options.exclude_top,
                "Rare-token heads: keys among the N most frequent never count as rare")
      ->check(integer_in(0, INT32_MAX))
      ->capture_default_str();
  h->callback([hd] { run_heads(*hd); });
  auto cl = std::make_shared<AnalyzeArgs>();
  auto* c = cmd->add_subcommand(
      "cluster", "Jensen-Shannon distances between heads and their 2-D classical MDS embedding");
  add_common(c, *cl);
  c->callback([cl] { run_cluster(*cl); });
  auto rl = std::make_shared<AnalyzeArgs>();
  auto rl_eps = std::make_shared<double>(0.01);
  auto rl_run = std::make_shared<std::string>();
  auto* r = cmd->add_subcommand(
      "relevance",
      "Layer-wise relevance propagation (epsilon rule): each head's share of its layer's "
      "relevance to the top-1 logit, against confidence, I_h and a prune run's removal order");
  add_common(r, *rl);
  r->add_option("--epsilon", *rl_eps, "The epsilon rule's stabiliser")
      ->check(number_in(1e-12, 1e6))
      ->capture_default_str();
  r->add_option("--run", *rl_run,
                "A prune run started from --checkpoint: correlate with its removal order")
      ->check(CLI::ExistingDirectory);
  r->callback([rl, rl_eps, rl_run] { run_relevance(*rl, *rl_eps, *rl_run); });
  auto al = std::make_shared<AnalyzeArgs>();
  auto al_target = std::make_shared<std::string>("kjv");
  auto al_links = std::make_shared<std::string>();
  auto al_run = std::make_shared<std::string>();
  auto al_margin = std::make_shared<double>(0.10);
  auto* g = cmd->add_subcommand(
      "align",
      "Encoder-decoder heads as word aligners: force-decode a reference and score each head and "
      "layer against gold word links (precision, AER, fixed-offset baselines)");
  add_common(g, *al);
  g->add_option("--target", *al_target,
                "The reference to force-decode: kjv (SPLIT.kjv.en with SPLIT.kjv.links) or web "
                "(the split's target with SPLIT.links), in the checkpoint's data folder")
      ->check(CLI::IsMember({"kjv", "web"}))
      ->capture_default_str();
  g->add_option("--links", *al_links, "Gold links instead of the data folder's (S-T / S?T)")
      ->check(CLI::ExistingFile);
  g->add_option("--run", *al_run, "A prune run started from --checkpoint: which aligners L0 kept")
      ->check(CLI::ExistingDirectory);
  g->add_option("--margin", *al_margin,
                "A head aligns when its precision beats the best baseline by this much")
      ->check(number_in(-1, 1))  // a difference of two precisions
      ->capture_default_str();
  g->callback([al, al_target, al_links, al_run, al_margin] {
    run_align(*al, *al_target, *al_links, *al_run, *al_margin);
  });
  auto cmp = std::make_shared<AnalyzeArgs>();
  auto run = std::make_shared<std::string>();
  auto* k = cmd->add_subcommand(
      "compare",
      "A prune run (L0 or Fisher) against Michel's importance pruning at equal head "
      "counts, and where the heads I_h and confidence rank highest were removed");
  add_common(k, *cmp);
  k->add_option("--run", *run, "The prune run (started from --checkpoint)")
      ->required()
      ->check(CLI::ExistingDirectory);
  k->add_flag("--normalize", cmp->normalize, "Layer-normalised I_h");
  k->add_option("--beam", cmp->options.beam, "Beam for BLEU (1: greedy)")
      ->check(fits_config_key("decode.beam"))
      ->capture_default_str();
  auto finetune = std::make_shared<bool>(false);
  k->add_flag("--finetune", *finetune,
              "Also fine-tune the Michel-pruned model (OUT/michel-pruned) with the prune run's "
              "config and budget, without gates (OUT/michel-finetuned; resumable)");
  auto finetune_threads = std::make_shared<int>(0);
  k->add_option("--finetune-threads", *finetune_threads,
                "BLAS threads of the fine-tuning (0: the prune run's config)")
      ->check(integer_in(0, 4096))
      ->capture_default_str();
  auto export_michel = std::make_shared<bool>(false);
  k->add_flag("--export-michel", *export_michel,
              "Also write the Michel-pruned model, physically smaller and not fine-tuned "
              "(OUT/michel-pruned), for eval and bench decode");
  k->callback([cmp, run, finetune, finetune_threads, export_michel] {
    run_compare(*cmp, *run, *finetune, *finetune_threads, *export_michel);
  });
}

}  // namespace headcount::cli
