#include "headcount/sweep/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "headcount/analysis/compare.h"
#include "headcount/analysis/head_table.h"
#include "headcount/analysis/heads_report.h"
#include "headcount/analysis/relevance_report.h"
#include "headcount/analysis/syntax.h"
#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/plot.h"
#include "headcount/common/provenance.h"
#include "headcount/common/text.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/record.h"
#include "headcount/eval/significance.h"
#include "headcount/prune/outcome.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"
#include "headcount/sweep/sweep.h"

namespace headcount::sweep {
namespace {

using json = nlohmann::json;

const char* const kTypes[] = {"enc_self", "dec_self", "enc_dec"};

std::optional<json> read_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  try {
    return json::parse(io::read_file(p));
  } catch (const std::exception& e) {
    log::warn("report: cannot read {}: {}", p.string(), e.what());
    return std::nullopt;
  }
}

// Heads kept per attention type.
std::vector<int64_t> heads_of(const model::Architecture& a) {
  std::vector<int64_t> out;
  for (const auto t : model::kAttentionTypes) out.push_back(a.total(t));
  return out;
}

// The same from an architecture.json; nullopt where it is not a valid architecture.
std::optional<std::vector<int64_t>> heads_of(const json& arch) {
  try {
    return heads_of(model::Architecture::from_json(arch));
  } catch (const Error&) {
    return std::nullopt;
  }
}

// A prune run's pruning.json; nullopt (with a warning) when it cannot be read.
std::optional<prune::PruneOutcome> read_outcome(const fs::path& run) {
  std::error_code ec;
  if (!fs::exists(run::RunFolder{run}.pruning(), ec)) return std::nullopt;
  try {
    return prune::read_prune_outcome(run);
  } catch (const std::exception& e) {
    log::warn("report: cannot read {}: {}", run::RunFolder{run}.pruning().string(), e.what());
    return std::nullopt;
  }
}

// Best dev BLEU of a training run and the chrF logged with it.
struct TrainedScore {
  std::optional<double> bleu, chrf;
  bool finished = false;
  int64_t best_step = -1;
};
TrainedScore trained_score(const fs::path& run) {
  TrainedScore s;
  s.finished = fs::exists(run::RunFolder{run}.summary());
  for (const auto& e : run::read_jsonl(run::RunFolder{run}.metrics())) {
    if (e.value("event", "") != "eval" || !e.contains("dev_bleu")) continue;
    const double b = e["dev_bleu"].get<double>();
    if (!s.bleu || b > *s.bleu) {
      s.bleu = b;
      s.best_step = e.value("step", int64_t{-1});
      if (e.contains("dev_chrf")) s.chrf = e["dev_chrf"].get<double>();
    }
  }
  return s;
}

// An eval-SPLIT.json; nullopt (with a warning) when it cannot be read.
std::optional<eval::EvalRecord> read_evaluation(const fs::path& cache) {
  try {
    return eval::read_eval_record(cache);
  } catch (const std::exception& e) {
    log::warn("report: cannot read {}: {}", cache.string(), e.what());
    return std::nullopt;
  }
}

// The scores of an eval-SPLIT.json (`cache`), with the translations beside it (`hyp_file`) where
// they are there; nullopt with a warning when it has no BLEU against the first reference.
std::optional<SplitScores> read_eval_scores(const eval::EvalRecord& evaluation,
                                            const fs::path& cache, const fs::path& hyp_file) {
  std::error_code ec;
  const auto* ref1 = evaluation.score("ref1");
  const auto* all_refs = evaluation.score("all_refs");
  SplitScores s;
  if (ref1) {
    s.bleu = ref1->bleu;
    s.chrf = ref1->chrf;
  }
  if (all_refs) {
    s.bleu_all_refs = all_refs->bleu;
    s.chrf_all_refs = all_refs->chrf;
  }
  s.sentences_per_s = evaluation.sentences_per_s;
  if (!evaluation.provenance.is_null())
    s.decoded_on = provenance::describe(evaluation.provenance) + ", " + evaluation.precision;
  if (fs::exists(hyp_file, ec)) s.hyp_file = hyp_file;
  if (!evaluation.ref_files.empty()) s.ref_file = evaluation.ref_files.front();
  if (!s.bleu) {
    log::warn("report: {} has no scores.ref1.bleu", cache.string());
    return std::nullopt;
  }
  for (const auto& v : {s.bleu, s.bleu_all_refs, s.chrf, s.chrf_all_refs}) {
    if (v && !(*v >= 0 && *v <= 100)) {
      log::warn("report: {} has a score of {}, outside 0-100: a damaged or edited record; left out",
                cache.string(), *v);
      return std::nullopt;
    }
  }
  return s;
}

// Whether a reference file the cached evaluation was scored against changed after it (edited or
// replaced): its scores would be another reference's.
bool references_changed(const fs::path& cache, const eval::EvalRecord& cached) {
  std::error_code ec;
  const auto written = fs::last_write_time(cache, ec);
  for (const auto& r : cached.ref_files) {
    std::error_code ec2;
    const auto changed = fs::last_write_time(r, ec2);
    if (!ec && !ec2 && changed > written) return true;
  }
  return false;
}

// Evaluates `checkpoint` on `split` through `headcount eval`, cached in run/eval-SPLIT.json (fresh
// when it names this checkpoint and is newer than its model.pt). Where the checkpoint is not here
// (a sweep's committed records, without weights), the recorded evaluation stands as it is.
std::optional<SplitScores> split_score(const ReportOptions& o, const std::string& split,
                                       const fs::path& checkpoint, const fs::path& run) {
  std::error_code ec;
  const fs::path cache = run / fmt::format("eval-{}.json", split);
  const fs::path log_file = run / fmt::format("eval-{}.log", split);
  const fs::path hyp_file = run / fmt::format("eval-{}.hyp.txt", split);
  auto cached = read_evaluation(cache);
  const bool here = fs::exists(run::CheckpointFolder{checkpoint}.weights(), ec);
  if (!here && !cached) return std::nullopt;
  if (!here)
    log::info("report: {} is not here; its recorded {} evaluation ({}) stands", checkpoint.string(),
              split, cache.string());
  const bool fresh =
      !here || (cached && cached->checkpoint == checkpoint.string() &&
                fs::last_write_time(cache, ec) >=
                    fs::last_write_time(run::CheckpointFolder{checkpoint}.weights()) &&
                !references_changed(cache, *cached));
  if (!fresh) {
    log::info("report: evaluating {} on {}", checkpoint.string(), split);
    const int code = run_command(o.executable,
                                 {"eval", "--checkpoint", checkpoint.string(), "--split", split,
                                  "--out", cache.string(), "--hyp-out", hyp_file.string()},
                                 log_file);
    if (code != 0) {
      log::warn("report: evaluating {} failed (exit {}); see {}", checkpoint.string(), code,
                log_file.string());
      return std::nullopt;
    }
    cached = read_evaluation(cache);
    if (!cached) return std::nullopt;
  }
  return read_eval_scores(*cached, cache, hyp_file);
}

// Lines as sacreBLEU reads them (trailing whitespace stripped); nullopt with a warning when the
// file cannot be read: one warning per file and reason, however many rows need it.
std::optional<std::vector<std::string>> segments(const fs::path& p) {
  try {
    auto lines = io::read_lines(p, {.allow_empty_file = true});
    for (auto& l : lines) l = text::rstrip_py_utf8(l);
    return lines;
  } catch (const Error& e) {
    static std::mutex mutex;
    static std::set<std::string> warned;
    const std::lock_guard lock(mutex);
    if (warned.insert(e.what()).second)
      log::warn("report: no paired test in the rows that need it: {}", e.what());
    return std::nullopt;
  }
}

// The paired bootstrap p-value of `run`'s BLEU against `control`'s on the same split, from their
// recorded translations; nullopt (the table shows the difference alone) where either is missing.
std::optional<double> paired_p(const SplitScores& run, const SplitScores& control) {
  if (run.hyp_file.empty() || control.hyp_file.empty() || run.ref_file.empty()) return std::nullopt;
  return paired_bleu_p(run.hyp_file, control.hyp_file, run.ref_file);
}

// split_score on every split listed; the splits whose evaluation is missing are left out.
std::map<std::string, SplitScores> split_scores(const ReportOptions& o,
                                                const std::vector<std::string>& splits,
                                                const fs::path& checkpoint, const fs::path& run) {
  std::map<std::string, SplitScores> out;
  for (const auto& split : splits)
    if (auto s = split_score(o, split, checkpoint, run)) out[split] = *s;
  return out;
}

// The splits to evaluate, checked: dev and test, each once.
std::vector<std::string> requested_splits(const ReportOptions& o) {
  const std::vector<std::string>& out = o.splits;
  for (size_t i = 0; i < out.size(); ++i) {
    HC_CHECK(out[i] == "dev" || out[i] == "test",
             "--split: expected dev, test or both comma-separated (dev,test), got '{}' in '{}'",
             out[i], fmt::join(out, ","));
    HC_CHECK(std::count(out.begin(), out.end(), out[i]) == 1,
             "--split: '{}' is listed twice in '{}'", out[i], fmt::join(out, ","));
  }
  return out;
}

std::string num(const std::optional<double>& v, int digits = 2) {
  return v ? fmt::format("{:.{}f}", *v, digits) : "";
}

// A head-removal grid for one run: removal step per layer x head for each gated type.
struct RemovalGrid {
  std::map<std::string, std::vector<std::vector<double>>> grid;  // NaN: kept
  double last_step = 0;
};
std::optional<RemovalGrid> removal_grid(const fs::path& run) {
  std::error_code ec;
  const fs::path csv = run::RunFolder{run}.head_removal();
  if (!fs::exists(csv, ec)) return std::nullopt;
  RemovalGrid g;
  for (const auto& row : run::read_head_removal(csv)) {
    const auto layer = static_cast<size_t>(row.head.layer);
    const auto head = static_cast<size_t>(row.head.head);
    auto& rows = g.grid[model::attention_name(row.head.type)];
    if (rows.size() <= layer) rows.resize(layer + 1);
    for (auto& r : rows)
      if (r.size() <= head) r.resize(head + 1, std::nan(""));
    if (rows[layer].size() <= head) rows[layer].resize(head + 1, std::nan(""));
    const double step = row.removal_step ? static_cast<double>(*row.removal_step) : std::nan("");
    rows[layer][head] = step;
    if (!std::isnan(step)) g.last_step = std::max(g.last_step, step);
  }
  for (auto& [t, rows] : g.grid) {
    size_t w = 0;
    for (const auto& r : rows) w = std::max(w, r.size());
    for (auto& r : rows) r.resize(w, std::nan(""));
  }
  if (const auto p = read_outcome(run))
    g.last_step = std::max(g.last_step, static_cast<double>(p->steps));
  return g;
}

std::vector<fs::path> write_plots(const Report& r, const fs::path& dir,
                                  const std::optional<double>& baseline_bleu) {
  std::vector<fs::path> made;
  if (!plot::have_gnuplot()) {
    log::warn("report: gnuplot not found (apt-get install gnuplot-nox): no plots");
    return made;
  }
  const fs::path pd = dir / "plots";
  fs::create_directories(pd);
  // BLEU against heads kept.
  // Pruned runs in columns 2 and 3, the zero-pruning controls in column 5.
  std::string dat = "# total_heads bleu_trained bleu_scratch label bleu_control\n";
  for (const auto& row : r.rows) {
    if (row.name == "baseline" || !row.heads) continue;
    int64_t total = 0;
    for (auto h : *row.heads) total += h;
    const std::string bleu = row.bleu ? num(row.bleu) : "NaN";
    dat += fmt::format("{} {} {} \"{}\" {}\n", total, row.is_control ? "NaN" : bleu,
                       row.bleu_scratch ? num(row.bleu_scratch) : "NaN", heads_summary(*row.heads),
                       row.is_control ? bleu : "NaN");
  }
  io::write_file_atomic(pd / "bleu_vs_heads.dat", dat);
  std::string gp;
  gp += "set terminal pngcairo noenhanced size 900,600 font ',11'\n";
  gp += fmt::format("set output {}\n", plot::quote(pd / "bleu_vs_heads.png"));
  gp += "set datafile missing 'NaN'\nset grid\nset key bottom right\n";
  gp += "set xlabel 'attention heads kept (encoder + decoder + decoder-encoder)'\n";
  gp += fmt::format("set ylabel '{}'\n", r.bleu_label);
  gp += "set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1\n";
  gp += fmt::format("plot {} using 1:2 with points pt 7 ps 1.5 title 'pruned (from trained)', \\\n",
                    plot::quote(pd / "bleu_vs_heads.dat"));
  gp += "  '' using 1:2:4 with labels offset 0,1 font ',8' notitle, \\\n";
  gp += "  '' using 1:3 with points pt 5 ps 1.3 title 'pruned architecture from scratch'";
  bool any_control = false;
  for (const auto& row : r.rows) any_control |= row.is_control && row.bleu && row.heads;
  if (any_control)
    gp += ", \\\n  '' using 1:5 with points pt 9 ps 1.6 title 'zero-pruning control'";
  if (baseline_bleu) {
    gp += fmt::format(", \\\n  {:.3f} with lines dt 2 lw 2 title 'baseline ({:.2f})'",
                      *baseline_bleu, *baseline_bleu);
  }
  for (const auto& row : r.rows) {
    if (!row.is_control || !row.bleu) continue;
    gp += fmt::format(", \\\n  {:.3f} with lines dt 4 lw 1.5 title {}", *row.bleu,
                      plot::quote(fmt::format("control {} ({:.2f})", row.name, *row.bleu)));
  }
  gp += "\n";
  io::write_file_atomic(pd / "bleu_vs_heads.gp", gp);
  if (plot::run_gnuplot(pd / "bleu_vs_heads.gp")) made.push_back(pd / "bleu_vs_heads.png");
  // Who goes first: one figure per run, a layer x head grid per gated type.
  for (const auto& row : r.rows) {
    if (row.name == "baseline") continue;
    const auto g = removal_grid(dir / row.name);
    if (!g || g->grid.empty()) continue;
    const double kept = g->last_step * 1.1 + 1;  // kept heads: the top colour
    std::vector<plot::Panel> panels;
    for (const char* type : kTypes) {
      if (!g->grid.count(type)) continue;
      plot::Panel p{type, g->grid.at(type)};
      for (auto& layer : p.values)
        for (auto& x : layer)
          if (std::isnan(x)) x = kept;
      panels.push_back(std::move(p));
    }
    plot::ColourScale scale;
    scale.palette = fmt::format("defined (0 'black', 0.5 'red', {} 'orange', 1 'yellow')",
                                g->last_step / kept * 0.999);
    scale.lo = 0;
    scale.hi = kept;
    const fs::path png = pd / fmt::format("removal_{}.png", row.name);
    if (plot::heatmaps(png, fmt::format("Heads removed in {}", row.name), panels,
                       "removal step; yellow: kept", scale))
      made.push_back(png);
  }
  return made;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// What `analyze compare` found for one run (compare.json; a figure it lacks stays unset).
struct CompareFigures {
  std::optional<double> rho_importance, rho_confidence, bleu_full, bleu_l0_masked,
      bleu_importance_masked;
};
// An analysis record through its reader; nullopt (with a warning) when it cannot be read, and
// quietly when it is not there.
template <typename F>
auto read_record(const fs::path& file, F read) -> std::optional<decltype(read(file))> {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  try {
    return read(file);
  } catch (const std::exception& e) {
    log::warn("report: cannot read {}: {}", file.string(), e.what());
    return std::nullopt;
  }
}

CompareFigures read_compare(const fs::path& adir) {
  CompareFigures f;
  const auto c = read_record(run::RunFolder{adir}.compare(), analysis::read_compare_record);
  if (!c) return f;
  // The record reads a null figure as NaN.
  auto val = [](double x) { return std::isnan(x) ? std::nullopt : std::optional<double>(x); };
  f.rho_importance = val(c->spearman_importance);
  f.rho_confidence = val(c->spearman_confidence);
  f.bleu_full = val(c->bleu_full);
  f.bleu_l0_masked = val(c->bleu_l0_masked);
  f.bleu_importance_masked = val(c->bleu_michel_masked);
  return f;
}

// Spearman's correlation of LRP relevance with the removal order (relevance.json).
std::optional<double> read_relevance_rho(const fs::path& adir) {
  const auto r =
      read_record(analysis::AnalysisFolder{adir}.relevance(), analysis::read_relevance_record);
  return r ? r->vs_removal_step.all : std::nullopt;
}

// The kept heads per function (heads.csv of `analyze heads`).
std::map<std::string, int> read_head_functions(const fs::path& adir) {
  std::map<std::string, int> functions;
  const fs::path file = analysis::AnalysisFolder{adir}.heads();
  std::error_code ec;
  if (!fs::exists(file, ec)) return functions;
  for (const auto& row : analysis::read_head_functions(file))
    for (const auto& f : row) ++functions[f];
  return functions;
}

// One analysed run's figures, read back from its analysis folder.
struct RunAnalysis {
  std::optional<double> rho_lrp;
  std::map<std::string, int> functions;
  CompareFigures compare;
  int64_t kept = 0;  // heads kept (with ReportRow::heads)
};

// One `headcount analyze` of the report; a failure is an error naming its log (a report without
// the analysis it was asked for, or with a part of it, would read as complete).
void run_analysis(const ReportOptions& o, const std::vector<std::string>& args,
                  const fs::path& adir) {
  const fs::path log_file = adir / "analyze.log";
  const int code = run_command(o.executable, args, log_file);
  HC_CHECK(code == 0, "report: `headcount {} {}` failed (exit status {}): see {}", args.at(0),
           args.at(1), code, log_file.string());
}

// Runs the analyses of one finished prune run that its folder does not hold yet (cached per split:
// RUN/analysis for dev, RUN/analysis-test); returns that folder.
fs::path run_analyses(const ReportOptions& o, const ReportRow& row, const fs::path& run,
                      const std::string& split, const std::string& n) {
  const fs::path adir = run / (split == "dev" ? std::string("analysis") : "analysis-" + split);
  fs::create_directories(adir);
  if (!fs::exists(adir / "heads.csv") || (!o.conllu.empty() && !fs::exists(adir / "syntax.csv"))) {
    log::info("report: analysing the heads of {}", (run::RunFolder{run}.pruned()).string());
    std::vector<std::string> args{
        "analyze", "heads",      "--checkpoint", (run::RunFolder{run}.pruned()).string(),
        "--split", split,        "--sentences",  n,
        "--out",   adir.string()};
    if (!o.conllu.empty()) args.insert(args.end(), {"--conllu", fs::absolute(o.conllu).string()});
    run_analysis(o, args, adir);
  }
  if (!fs::exists(run::RunFolder{adir}.compare())) {
    const auto init = load_config_file(run::RunFolder{run}.config()).prune.init_from;
    log::info("report: comparing {} with importance pruning of {}", row.name, init);
    run_analysis(o,
                 {"analyze", "compare", "--checkpoint", init, "--run", run.string(), "--split",
                  split, "--sentences", n, "--out", adir.string()},
                 adir);
  }
  if (!fs::exists(adir / "relevance.json")) {
    const auto init = load_config_file(run::RunFolder{run}.config()).prune.init_from;
    log::info("report: LRP head relevance of {} against {}'s removal order", init, row.name);
    run_analysis(o,
                 {"analyze", "relevance", "--checkpoint", init, "--run", run.string(), "--split",
                  split, "--sentences", n, "--out", adir.string()},
                 adir);
  }
  return adir;
}

RunAnalysis read_analysis(const ReportRow& row, const fs::path& adir) {
  RunAnalysis a;
  a.rho_lrp = read_relevance_rho(adir);
  a.functions = read_head_functions(adir);
  if (row.heads)
    for (auto h : *row.heads) a.kept += h;
  a.compare = read_compare(adir);
  return a;
}

std::string analysis_csv_line(const ReportRow& row, RunAnalysis& a) {
  const CompareFigures& c = a.compare;
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(row.name),
                     row.heads ? std::to_string(a.kept) : "", a.functions["positional"],
                     a.functions["syntactic"], a.functions["rare-token"], a.functions["none"],
                     num(c.rho_importance, 3), num(c.rho_confidence, 3), num(a.rho_lrp, 3),
                     num(c.bleu_full), num(c.bleu_l0_masked), num(c.bleu_importance_masked));
}

std::string analysis_md_line(const ReportRow& row, RunAnalysis& a) {
  const CompareFigures& c = a.compare;
  auto cell = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
  return fmt::format("| {} | {} | {} / {} / {} / {} | {} | {} | {} | {} | {} | {} |\n", row.name,
                     row.heads ? std::to_string(a.kept) : "-", a.functions["positional"],
                     a.functions["syntactic"], a.functions["rare-token"], a.functions["none"],
                     cell(num(c.rho_importance, 3)), cell(num(c.rho_confidence, 3)),
                     cell(num(a.rho_lrp, 3)), cell(num(c.bleu_full)), cell(num(c.bleu_l0_masked)),
                     cell(num(c.bleu_importance_masked)));
}

// The analysis section's legend and table head.
std::string analysis_intro(const std::string& n, const std::string& split) {
  std::string md = fmt::format(
      "\nAnalysis ({} {} sentences, greedy): the kept heads by function (as `headcount analyze "
      "heads` names them; a head can have several functions; syntactic needs `--conllu`), "
      "Spearman's correlation of I_h, of confidence and of LRP relevance (`headcount analyze "
      "relevance`) with the removal order, "
      "and BLEU of the starting model with L0's removed heads masked against as many "
      "least-important (I_h) heads masked, no fine-tuning.\n\n",
      n, split);
  md +=
      "| run | heads kept | positional / syntactic / rare-token / none | rho(I_h) | "
      "rho(confidence) | rho(LRP) | start BLEU | L0 heads masked | I_h heads masked |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  return md;
}

using FunctionFigure = std::vector<std::pair<int64_t, std::map<std::string, int>>>;

// Voita et al.'s Figure 8: the kept heads by function against the number of heads kept. Returns
// the markdown line naming it, or "" when gnuplot made none.
std::string functions_figure(const fs::path& dir, FunctionFigure figure) {
  std::sort(figure.begin(), figure.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  const fs::path pd = dir / "plots";
  fs::create_directories(pd);
  std::string dat = "# heads_kept positional syntactic rare-token none\n";
  for (const auto& [k, f] : figure)
    dat += fmt::format("{} {} {} {} {}\n", k, f.count("positional") ? f.at("positional") : 0,
                       f.count("syntactic") ? f.at("syntactic") : 0,
                       f.count("rare-token") ? f.at("rare-token") : 0,
                       f.count("none") ? f.at("none") : 0);
  io::write_file_atomic(pd / "functions.dat", dat);
  std::string gp = fmt::format(
      "set terminal pngcairo noenhanced size 800,500\nset output {}\n"
      "set title 'Functions of the kept heads (a head can have several)'\n"
      "set xlabel 'heads kept'\nset ylabel 'heads'\nset grid\nset key outside\n"
      "set xrange [*:*] reverse\nset style data linespoints\n"
      "plot {} u 1:2 t 'positional' lw 2, '' u 1:3 t 'syntactic' lw 2, '' u 1:4 t 'rare-token' "
      "lw 2, '' u 1:5 t 'none' lw 2\n",
      plot::quote((pd / "functions.png").string()), plot::quote((pd / "functions.dat").string()));
  io::write_file_atomic(pd / "functions.gp", gp);
  if (plot::run_gnuplot(pd / "functions.gp"))
    return "\nKept heads by function: [functions.png](plots/functions.png)\n";
  return "";
}

// Functions of the kept heads and L0 against importance pruning, for each finished prune run.
std::string analysis_section(const ReportOptions& o, const Report& r) {
  // The first split listed (dev BLEU as logged: dev).
  const std::string split = r.splits.empty() ? "dev" : r.splits.front();
  const std::string n = std::to_string(o.analysis_sentences);
  std::string csv =
      "run,heads_kept,kept_positional,kept_syntactic,kept_rare_token,kept_none,"
      "spearman_importance_removal,"
      "spearman_confidence_removal,spearman_lrp_removal,bleu_full,bleu_l0_masked,"
      "bleu_importance_masked\n";
  std::string md = analysis_intro(n, split);
  FunctionFigure figure;  // heads kept -> functions
  for (const auto& row : r.rows) {
    const fs::path run = o.dir / row.name;
    if (row.name == "baseline" || row.state != "done" || !fs::exists(run::RunFolder{run}.pruned()))
      continue;
    const fs::path adir = run_analyses(o, row, run, split, n);
    RunAnalysis a = read_analysis(row, adir);
    if (row.heads) figure.push_back({a.kept, a.functions});
    csv += analysis_csv_line(row, a);
    md += analysis_md_line(row, a);
  }
  io::write_file_atomic(o.dir / "results_analysis.csv", csv);
  if (o.plots && !figure.empty() && plot::have_gnuplot()) md += functions_figure(o.dir, figure);
  return md;
}

// sweep.json of the folder or, for committed records without it, the manifest of the sweep file.
json read_manifest(const ReportOptions& o) {
  auto manifest = read_json(o.dir / "sweep.json");
  if (!manifest && !o.sweep_file.empty()) manifest = sweep_manifest(load_sweep(o.sweep_file));
  HC_CHECK(manifest,
           "{} is not a sweep folder: no sweep.json (run `headcount sweep` first, or name the "
           "sweep file its runs came from with --sweep)",
           o.dir.string());
  // Run names are folders of the sweep: a damaged or edited sweep.json must not lead the report
  // (which writes evaluations into each run) out of it.
  const fs::path file = o.dir / "sweep.json";
  HC_CHECK(manifest->is_object() && manifest->value("points", json::array()).is_array(),
           "{}: expected an object with a list of 'points'", file.string());
  for (const auto& p : manifest->value("points", json::array())) {
    const json name = p.is_object() ? p.value("name", json()) : json();
    HC_CHECK(name.is_string() && !name.get<std::string>().empty() &&
                 name.get<std::string>().find('/') == std::string::npos && name != "." &&
                 name != "..",
             "{}: a point's name is {}, expected the name of a run folder inside the sweep",
             file.string(), name.dump());
  }
  return *manifest;
}

// The primary figures of a row: its scores on the last split listed.
void take_primary(const std::string& primary, ReportRow& row) {
  if (primary.empty()) return;
  if (const auto it = row.scores.find(primary); it != row.scores.end()) {
    row.bleu = it->second.bleu;
    row.chrf = it->second.chrf;
    row.sentences_per_s = it->second.sentences_per_s;
    row.decoded_on = it->second.decoded_on;
  }
  if (const auto it = row.scratch_scores.find(primary); it != row.scratch_scores.end())
    row.bleu_scratch = it->second.bleu;
}

// The baseline's row, first in the table, where the sweep names one; returns its BLEU.
std::optional<double> add_baseline_row(const ReportOptions& o, const json& manifest,
                                       const std::string& primary, Report& r) {
  std::optional<double> base_bleu;
  const std::string baseline = manifest.value("baseline", "");
  if (baseline.empty()) return base_bleu;
  ReportRow b;
  b.name = "baseline";
  const fs::path run = baseline;
  const auto s = trained_score(run);
  b.state = s.finished ? "done" : (s.bleu ? "training" : "missing");
  fs::path ckpt = run::RunFolder{run}.best();
  if (!fs::exists(ckpt)) {
    ckpt = run;  // the baseline given as a checkpoint folder: finished weights
    if (fs::exists(run::CheckpointFolder{run}.architecture())) b.state = "done";
  }
  if (const auto a = read_json(run::CheckpointFolder{ckpt}.architecture())) b.heads = heads_of(*a);
  if (r.splits.empty()) {
    b.bleu = s.bleu;
    b.chrf = s.chrf;
  } else {
    b.scores = split_scores(o, r.splits, ckpt, run);
    take_primary(primary, b);
  }
  base_bleu = b.bleu;
  r.rows.push_back(b);
  return base_bleu;
}

// A prune run's row from its pruning.json (and the baseline's parameter count, where missing).
void score_prune_run(const ReportOptions& o, const prune::PruneOutcome& pr, const fs::path& run,
                     Report& r, ReportRow& row) {
  row.heads = heads_of(pr.architecture_after);
  row.parameters = pr.parameters_after;
  if (!r.rows.empty() && r.rows[0].name == "baseline" && !r.rows[0].parameters)
    r.rows[0].parameters = pr.parameters_before;
  if (r.splits.empty()) {
    row.bleu = pr.dev_bleu_end;
    for (const auto& e : run::read_jsonl(run::RunFolder{run}.metrics()))
      if (e.value("event", "") == "final" && e.contains("dev_chrf"))
        row.chrf = e["dev_chrf"].get<double>();
  } else {
    row.scores = split_scores(o, r.splits, run::RunFolder{run}.pruned(), run);
  }
}

// A training sweep's run: its best checkpoint.
void score_train_run(const ReportOptions& o, const fs::path& run, const Report& r, ReportRow& row) {
  const auto s = trained_score(run);
  if (r.splits.empty()) {
    row.bleu = s.bleu;
    row.chrf = s.chrf;
  } else {
    row.scores = split_scores(o, r.splits, run::RunFolder{run}.best(), run);
  }
  if (const auto a = read_json(run::CheckpointFolder{run::RunFolder{run}.best()}.architecture()))
    row.heads = heads_of(*a);
}

// The run's pruned architecture trained from scratch (with the sweep's retrain).
void score_scratch_run(const ReportOptions& o, const fs::path& run, const Report& r,
                       ReportRow& row) {
  if (nothing_pruned(run)) {
    row.scratch_state = "nothing pruned";  // the architecture is the baseline's
    return;
  }
  const fs::path scratch = run / "scratch";
  row.scratch_state = state_name(run_state(scratch));
  if (r.splits.empty()) {
    row.bleu_scratch = trained_score(scratch).bleu;
  } else if (run_state(scratch) == RunState::kDone) {
    row.scratch_scores = split_scores(o, r.splits, run::RunFolder{scratch}.best(), scratch);
  }
}

// One sweep point's row.
ReportRow point_row(const ReportOptions& o, const json& manifest, const json& p,
                    const std::string& primary, const std::optional<double>& base_bleu, Report& r) {
  ReportRow row;
  row.name = p["name"].get<std::string>();
  row.is_control = p.value("is_control", false);
  row.control = p.value("control", "");
  for (const auto& [k, v] : p["values"].items()) row.values.emplace_back(k, v.get<std::string>());
  const fs::path run = o.dir / row.name;
  row.state = state_name(run_state(run));
  if (const auto pr = read_outcome(run))
    score_prune_run(o, *pr, run, r, row);
  else if (manifest.value("command", "") == "train")
    score_train_run(o, run, r, row);
  if (manifest.value("retrain", false)) score_scratch_run(o, run, r, row);
  take_primary(primary, row);
  if (row.bleu && base_bleu) row.delta = *row.bleu - *base_bleu;
  return row;
}

// The zero-pruning control of the row's setting, if the table has it.
const ReportRow* control_row(const Report& r, const ReportRow& row) {
  if (row.control.empty()) return nullptr;
  for (const auto& c : r.rows)
    if (c.name == row.control && c.name != "baseline") return &c;
  return nullptr;
}

// Against the zero-pruning control of each run's setting.
void compare_with_controls(const std::string& primary, Report& r) {
  for (auto& row : r.rows) {
    const ReportRow* c = control_row(r, row);
    if (!c || !row.bleu || !c->bleu) continue;
    row.delta_control = *row.bleu - *c->bleu;
    const auto mine = row.scores.find(primary);
    const auto theirs = c->scores.find(primary);
    if (!primary.empty() && mine != row.scores.end() && theirs != c->scores.end())
      row.p_control = paired_p(mine->second, theirs->second);
  }
}

// Against the baseline (the first row), on the primary split.
void compare_with_baseline(const std::string& primary, Report& r) {
  if (primary.empty() || r.rows.empty() || r.rows[0].name != "baseline") return;
  const auto base_scores = r.rows[0].scores.find(primary);
  for (size_t i = 1; i < r.rows.size(); ++i) {
    auto& row = r.rows[i];
    const auto mine = row.scores.find(primary);
    if (row.delta && base_scores != r.rows[0].scores.end() && mine != row.scores.end())
      row.p_baseline = paired_p(mine->second, base_scores->second);
  }
}

// A per-split BLEU column of the trained runs or of their retrainings from scratch: each split's,
// and a split with several references also against all of them.
struct SplitColumn {
  std::string split;
  bool scratch, all_refs;
  std::string csv() const {
    return fmt::format("bleu_{}{}{}", scratch ? "scratch_" : "", split,
                       all_refs ? "_all_refs" : "");
  }
  std::string md() const {
    return fmt::format("{} {}{}", split, scratch ? "from scratch" : "BLEU",
                       all_refs ? " all refs" : "");
  }
  std::optional<double> of(const ReportRow& row) const {
    const auto& m = scratch ? row.scratch_scores : row.scores;
    const auto it = m.find(split);
    if (it == m.end()) return std::nullopt;
    return all_refs ? it->second.bleu_all_refs : it->second.bleu;
  }
};

// A change column: the difference (`of`) and, where both sides' translations are recorded, its
// paired bootstrap p-value (`p`, unset for the columns without one).
struct ChangeColumn {
  std::string md, csv;
  std::function<std::optional<double>(const ReportRow&)> of;
  std::function<std::optional<double>(const ReportRow&)> p;
};

std::optional<double> split_bleu(const std::map<std::string, SplitScores>& m,
                                 const std::string& split) {
  const auto it = m.find(split);
  return it == m.end() ? std::nullopt : it->second.bleu;
}

std::optional<double> minus(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return std::nullopt;
  return *a - *b;
}

std::optional<double> split_p(const std::map<std::string, SplitScores>& a,
                              const std::map<std::string, SplitScores>& b,
                              const std::string& split) {
  const auto x = a.find(split), y = b.find(split);
  if (x == a.end() || y == b.end()) return std::nullopt;
  return paired_p(x->second, y->second);
}

// The table's columns, decided from its rows, and the change columns' values row by row.
struct Layout {
  std::string primary;
  bool retrain = false;
  bool p_column = false, p_baseline_column = false;
  // A BLEU column per split (and reference set): with several splits or a split with several
  // references.
  bool per_split = false;
  bool chrf_all_refs_column = false;  // chrF against all references of the primary split (csv)
  // sent/s in the markdown: only when every row with a speed was decoded on the same recorded
  // machine, build and precision (speeds of different machines are not comparable).
  bool speed_column = false;
  bool scratch_change = false;
  std::vector<SplitColumn> trained_columns, scratch_columns;
  std::vector<std::string> other_splits;
  std::vector<ChangeColumn> change_columns;
  std::vector<std::vector<std::optional<double>>> change_value, change_p;
  std::vector<bool> change_has_p;
};

// The splits with several references (an all_refs score in any row's evaluation): their BLEU
// against all references gets columns of its own.
std::set<std::string> splits_with_several_refs(const Report& r) {
  std::set<std::string> several_refs;
  for (const auto& row : r.rows)
    for (const auto* m : {&row.scores, &row.scratch_scores})
      for (const auto& [split, sc] : *m)
        if (sc.bleu_all_refs) several_refs.insert(split);
  return several_refs;
}

std::string bleu_label(const Report& r, const Layout& t) {
  if (r.splits.empty()) return "dev BLEU (as logged by the runs)";
  if (!t.per_split) return fmt::format("{} BLEU (decode.* settings of each checkpoint)", t.primary);
  return fmt::format("{} BLEU against the first reference (decode.* settings of each checkpoint)",
                     t.primary);
}

void add_split_columns(const Report& r, const std::set<std::string>& several_refs, Layout& t) {
  if (!t.per_split) return;
  for (const auto& s : r.splits)
    for (bool all_refs : {false, true}) {
      if (all_refs && !several_refs.count(s)) continue;
      t.trained_columns.push_back({s, false, all_refs});
      t.scratch_columns.push_back({s, true, all_refs});
    }
}

// The changes on the other splits: against the baseline and against the run's control (first
// reference).
void add_other_split_changes(const Report& r, Layout& t) {
  const Report* rep = &r;
  const ReportRow* base_row =
      !r.rows.empty() && r.rows[0].name == "baseline" ? &r.rows[0] : nullptr;
  for (const auto& s : t.other_splits) {
    t.change_columns.push_back({s + " vs baseline", "bleu_change_" + s,
                                [base_row, s](const ReportRow& row) {
                                  if (!base_row || &row == base_row) return std::optional<double>();
                                  return minus(split_bleu(row.scores, s),
                                               split_bleu(base_row->scores, s));
                                },
                                [base_row, s](const ReportRow& row) {
                                  if (!base_row || &row == base_row) return std::optional<double>();
                                  return split_p(row.scores, base_row->scores, s);
                                }});
    t.change_columns.push_back({s + " vs control", "bleu_change_control_" + s,
                                [rep, s](const ReportRow& row) {
                                  const ReportRow* c = control_row(*rep, row);
                                  if (!c) return std::optional<double>();
                                  return minus(split_bleu(row.scores, s), split_bleu(c->scores, s));
                                },
                                [rep, s](const ReportRow& row) {
                                  const ReportRow* c = control_row(*rep, row);
                                  if (!c) return std::optional<double>();
                                  return split_p(row.scores, c->scores, s);
                                }});
  }
}

// From scratch against from trained (each split's, the primary's first).
void add_scratch_changes(const Report& r, Layout& t) {
  t.scratch_change = std::any_of(r.rows.begin(), r.rows.end(),
                                 [](const ReportRow& row) { return row.bleu && row.bleu_scratch; });
  if (!t.scratch_change) return;
  const std::string primary = t.primary;
  t.change_columns.push_back(
      {"scratch vs trained", "bleu_scratch_change",
       [](const ReportRow& row) { return minus(row.bleu_scratch, row.bleu); },
       [primary](const ReportRow& row) {
         return primary.empty() ? std::nullopt : split_p(row.scratch_scores, row.scores, primary);
       }});
  for (const auto& s : t.other_splits)
    t.change_columns.push_back(
        {s + " scratch vs trained", "bleu_scratch_change_" + s,
         [s](const ReportRow& row) {
           return minus(split_bleu(row.scratch_scores, s), split_bleu(row.scores, s));
         },
         [s](const ReportRow& row) { return split_p(row.scratch_scores, row.scores, s); }});
}

// The change columns' values and p-values, row by row (a p-value resamples the translations).
void compute_changes(const Report& r, Layout& t) {
  t.change_value.assign(r.rows.size(), {});
  t.change_p.assign(r.rows.size(), {});
  t.change_has_p.assign(t.change_columns.size(), false);
  for (size_t i = 0; i < r.rows.size(); ++i)
    for (size_t j = 0; j < t.change_columns.size(); ++j) {
      const auto& col = t.change_columns[j];
      t.change_value[i].push_back(col.of(r.rows[i]));
      t.change_p[i].push_back(t.change_value[i].back() ? col.p(r.rows[i]) : std::nullopt);
      if (t.change_p[i].back()) t.change_has_p[j] = true;
    }
}

// Decides the table's columns (and the BLEU column's label) from the rows.
Layout table_layout(const std::string& primary, bool retrain, Report& r) {
  Layout t;
  {
    std::set<std::string> machines;
    bool unrecorded = false;
    for (const auto& row : r.rows)
      if (row.sentences_per_s) {
        machines.insert(row.decoded_on);
        unrecorded |= row.decoded_on.empty();
      }
    // No speeds at all: the column stays, empty, as before.
    t.speed_column = machines.empty() || (machines.size() == 1 && !unrecorded);
  }
  t.primary = primary;
  t.retrain = retrain;
  t.p_column = std::any_of(r.rows.begin(), r.rows.end(),
                           [](const ReportRow& row) { return row.p_control.has_value(); });
  t.p_baseline_column = std::any_of(r.rows.begin(), r.rows.end(), [](const ReportRow& row) {
    return row.p_baseline.has_value();
  });
  const std::set<std::string> several_refs = splits_with_several_refs(r);
  t.per_split = r.splits.size() > 1 || !several_refs.empty();
  r.bleu_label = bleu_label(r, t);
  add_split_columns(r, several_refs, t);
  t.chrf_all_refs_column = t.per_split && several_refs.count(primary) > 0;
  for (const auto& s : r.splits)
    if (s != primary) t.other_splits.push_back(s);
  add_other_split_changes(r, t);
  add_scratch_changes(r, t);
  compute_changes(r, t);
  return t;
}

// A row's cells shared by the csv and the markdown.
struct RowCells {
  std::vector<std::string> values;  // per axis
  std::string heads, total, params;
};
RowCells row_cells(const Report& r, const ReportRow& row) {
  RowCells c;
  for (const auto& a : r.axes) {
    std::string v;
    for (const auto& [k, x] : row.values)
      if (k == a) v = x;
    c.values.push_back(v);
  }
  int64_t total = 0;
  if (row.heads)
    for (auto h : *row.heads) total += h;
  c.heads = row.heads ? heads_summary(*row.heads) : "";
  c.total = row.heads ? std::to_string(total) : "";
  c.params = row.parameters ? std::to_string(*row.parameters) : "";
  return c;
}

// A p-value in the csv.
std::string p_field(const std::optional<double>& p) {
  return p ? fmt::format("{:.4f}", *p) : std::string();
}

std::string csv_header(const Report& r, const Layout& t) {
  std::vector<std::string> header = {"run", "state"};
  for (const auto& a : r.axes) header.push_back(a);
  for (const char* h :
       {"heads_e_d_de", "heads_total", "parameters", "bleu", "bleu_scratch", "scratch_state",
        "chrf", "bleu_change", "control", "bleu_change_control", "sentences_per_s"})
    header.push_back(h);
  // Per split, appended so that readers of the columns above keep working.
  for (const auto& col : t.trained_columns) header.push_back(col.csv());
  if (t.chrf_all_refs_column) header.push_back("chrf_" + t.primary + "_all_refs");
  for (const auto& col : t.scratch_columns) header.push_back(col.csv());
  for (const auto& col : t.change_columns) header.push_back(col.csv);
  if (t.p_column) header.push_back("p_control");
  if (t.p_baseline_column) header.push_back("p_baseline");
  for (size_t j = 0; j < t.change_columns.size(); ++j)
    if (t.change_has_p[j]) header.push_back("p_" + t.change_columns[j].csv);
  return fmt::format("{}\n", fmt::join(header, ","));
}

std::string csv_line(const Report& r, const Layout& t, size_t ri) {
  const ReportRow& row = r.rows[ri];
  const RowCells cells = row_cells(r, row);
  std::vector<std::string> c = {row.name, row.state};
  for (const auto& v : cells.values) c.push_back(v);
  for (const auto& s : {cells.heads, cells.total, cells.params, num(row.bleu),
                        num(row.bleu_scratch), row.scratch_state, num(row.chrf), num(row.delta),
                        row.is_control ? std::string("self") : row.control, num(row.delta_control),
                        num(row.sentences_per_s, 1)})
    c.push_back(s);
  for (const auto& col : t.trained_columns) c.push_back(num(col.of(row)));
  if (t.chrf_all_refs_column) {
    const auto it = row.scores.find(t.primary);
    c.push_back(it == row.scores.end() ? "" : num(it->second.chrf_all_refs));
  }
  for (const auto& col : t.scratch_columns) c.push_back(num(col.of(row)));
  for (const auto& v : t.change_value[ri]) c.push_back(num(v));
  if (t.p_column) c.push_back(p_field(row.p_control));
  if (t.p_baseline_column) c.push_back(p_field(row.p_baseline));
  for (size_t j = 0; j < t.change_columns.size(); ++j)
    if (t.change_has_p[j]) c.push_back(p_field(t.change_p[ri][j]));
  std::vector<std::string> cq;
  for (const auto& s : c) cq.push_back(csv_field(s));
  return fmt::format("{}\n", fmt::join(cq, ","));
}

// results.csv
std::string render_csv(const Report& r, const Layout& t) {
  std::string csv = csv_header(r, t);
  for (size_t ri = 0; ri < r.rows.size(); ++ri) csv += csv_line(r, t, ri);
  return csv;
}

// What the markdown table's columns are.
std::string markdown_legend(const Report& r, const Layout& t) {
  std::string md;
  if (t.per_split) {
    std::vector<std::string> names;
    for (const auto& s : r.splits) names.push_back(s + " BLEU");
    md += fmt::format(
        "BLEU: {}, the last split listed; the change columns (vs baseline, vs control), chrF, "
        "sent/s and the plot are on it. {}: against the split's first reference; all refs: "
        "against all its references together. {}",
        r.bleu_label, fmt::join(names, ", "),
        t.other_splits.empty()
            ? std::string()
            : fmt::format("{} vs baseline, {} vs control: the same changes on that split. ",
                          fmt::join(t.other_splits, "/"), fmt::join(t.other_splits, "/")));
  } else {
    md += fmt::format("BLEU: {}. ", r.bleu_label);
  }
  md +=
      "Heads kept: encoder / decoder / decoder-encoder self- and "
      "cross-attention (e/d/d-e). From scratch: the pruned architecture trained "
      "from a random initialisation. vs control: BLEU minus that of the zero-pruning control of "
      "the run's setting (the baseline fine-tuned for the same steps with prune.lambda 0)";
  const bool any_p =
      t.p_column || t.p_baseline_column ||
      std::find(t.change_has_p.begin(), t.change_has_p.end(), true) != t.change_has_p.end();
  md += any_p ? "; p: the paired bootstrap p-value of a change (1,000 resamples of the "
                "segments; `headcount bleu --paired-bs`), where both translations are recorded"
              : "";
  if (t.scratch_change)
    md +=
        "; scratch vs trained: BLEU from scratch minus BLEU of the pruned model fine-tuned from "
        "the baseline (from trained)";
  if (!t.speed_column)
    md +=
        "; no speed column: the rows were decoded on different or unrecorded machines "
        "(results.csv keeps sentences_per_s; `headcount bench decode --compare` measures a "
        "pruned model against its baseline in one run)";
  md += ".\n\n";
  return md;
}

std::string markdown_header(const Report& r, const Layout& t) {
  std::vector<std::string> mdh = {"run"};
  for (const auto& a : r.axes) mdh.push_back(a);
  for (const char* h : {"heads e/d/d-e", "total", "parameters"}) mdh.push_back(h);
  if (t.per_split) {
    for (const auto* cols : {&t.trained_columns, &t.scratch_columns})
      for (const auto& col : *cols) mdh.push_back(col.md());
  } else {
    mdh.push_back("BLEU");
    mdh.push_back("from scratch");
  }
  for (const char* h : {"chrF", "vs baseline", "vs control"}) mdh.push_back(h);
  for (const auto& col : t.change_columns) mdh.push_back(col.md);
  if (t.speed_column) mdh.push_back("sent/s");
  std::string md = fmt::format("| {} |\n", fmt::join(mdh, " | "));
  std::vector<std::string> align(mdh.size(), "---:");
  align[0] = "---";
  for (size_t i = 0; i < r.axes.size(); ++i) align[1 + i] = "---";
  md += fmt::format("| {} |\n", fmt::join(align, " | "));
  return md;
}

// A change with its p-value, where there is one.
std::string change_cell(const std::optional<double>& v, const std::optional<double>& p) {
  return !v  ? std::string("-")
         : p ? fmt::format("{:+.2f} (p {:.3f})", *v, *p)
             : fmt::format("{:+.2f}", *v);
}

std::string markdown_line(const Report& r, const Layout& t, size_t ri) {
  const ReportRow& row = r.rows[ri];
  const RowCells cells = row_cells(r, row);
  auto missing = [](const std::string& v, const std::string& state) {
    if (!v.empty()) return v;
    return state.empty() || state == "done" ? std::string("-") : fmt::format("({})", state);
  };
  std::vector<std::string> notes;
  if (row.is_control) notes.push_back("control");
  if (row.state != "done" && row.name != "baseline") notes.push_back(row.state);
  std::vector<std::string> m = {
      notes.empty() ? row.name : fmt::format("{} ({})", row.name, fmt::join(notes, ", "))};
  for (const auto& v : cells.values) m.push_back(v.empty() ? "-" : v);
  const std::string pending = row.state != "done" && row.name != "baseline" ? row.state : "";
  m.push_back(missing(cells.heads, pending));
  m.push_back(missing(cells.total, pending));
  m.push_back(missing(cells.params, pending));
  auto bleu_cell = [&](const std::optional<double>& v) { return missing(num(v), pending); };
  auto scratch_cell = [&](const std::optional<double>& v) {
    std::string scratch = num(v);
    if (!scratch.empty() && row.scratch_state != "done") scratch += " (" + row.scratch_state + ")";
    return t.retrain || !row.scratch_state.empty() ? missing(scratch, row.scratch_state) : "-";
  };
  if (t.per_split) {
    for (const auto& col : t.trained_columns) m.push_back(bleu_cell(col.of(row)));
    for (const auto& col : t.scratch_columns) m.push_back(scratch_cell(col.of(row)));
  } else {
    m.push_back(bleu_cell(row.bleu));
    m.push_back(scratch_cell(row.bleu_scratch));
  }
  m.push_back(missing(num(row.chrf), pending));
  m.push_back(change_cell(row.delta, row.p_baseline));
  m.push_back(change_cell(row.delta_control, row.p_control));
  for (size_t j = 0; j < t.change_columns.size(); ++j)
    m.push_back(change_cell(t.change_value[ri][j], t.change_p[ri][j]));
  if (t.speed_column) m.push_back(row.sentences_per_s ? num(row.sentences_per_s, 1) : "-");
  return fmt::format("| {} |\n", fmt::join(m, " | "));
}

// Where the rows' primary evaluations were decoded, row names grouped by machine and build.
std::string decoded_on_markdown(const Report& r) {
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& row : r.rows)
    if (row.bleu && !r.splits.empty())
      by[row.decoded_on.empty() ? "not recorded (evaluated before commits recorded it)"
                                : row.decoded_on]
          .push_back(row.name);
  if (by.empty()) return "";
  std::string md = fmt::format("\nDecoded ({}):\n", r.splits.back());
  for (const auto& [where, names] : by)
    md += fmt::format("- {}: {}\n", where, fmt::join(names, ", "));
  if (by.size() > 1)
    md +=
        "\nRows decoded on different machines or builds differ by their kernels and rounding "
        "as well (0.03-0.2 BLEU measured between machines): their changes mix the two.\n";
  return md;
}

// results.md's legend and table.
std::string render_markdown(const Report& r, const Layout& t) {
  std::string md = markdown_legend(r, t) + markdown_header(r, t);
  for (size_t ri = 0; ri < r.rows.size(); ++ri) md += markdown_line(r, t, ri);
  return md + decoded_on_markdown(r);
}

std::string plots_markdown(const ReportOptions& o, const Report& r) {
  if (r.plots.empty()) return "";
  std::string md = "\nPlots:";
  for (const auto& p : r.plots)
    md += fmt::format(" [{}]({})", p.filename().string(), fs::relative(p, o.dir).string());
  return md + "\n";
}

// A file as it is on disk now: its path, size and modification time (a rewritten file is another).
struct FileState {
  std::string path;
  uintmax_t size = 0;
  fs::file_time_type written;
  bool operator<(const FileState& o) const {
    return std::tie(path, size, written) < std::tie(o.path, o.size, o.written);
  }
};

// None where the file cannot be looked at (it was read a moment ago: then it is simply not cached).
std::optional<FileState> file_state(const fs::path& p) {
  std::error_code e1, e2;
  FileState f{fs::absolute(p).lexically_normal().string(), fs::file_size(p, e1),
              fs::last_write_time(p, e2)};
  if (e1 || e2) return std::nullopt;
  return f;
}

// BLEU's sentence statistics of a hypothesis file against a reference file, computed once per
// process for each pair of files as they are on disk: a table pairs each run with several others,
// and the n-gram counts, not the resampling, are most of a paired test's time.
std::shared_ptr<const eval::SegmentStats> bleu_stats(const fs::path& hyp_file,
                                                     const std::vector<std::string>& hyp,
                                                     const fs::path& ref_file,
                                                     const std::vector<std::string>& ref) {
  static std::mutex mutex;
  static std::map<std::pair<FileState, FileState>, std::shared_ptr<const eval::SegmentStats>> cache;
  const auto compute = [&] {
    return std::make_shared<const eval::SegmentStats>(
        eval::bleu_segment_stats(eval::Bleu{}, hyp, {ref}));
  };
  const auto h = file_state(hyp_file), r = file_state(ref_file);
  if (!h || !r) return compute();
  const auto key = std::make_pair(*h, *r);
  {
    const std::lock_guard lock(mutex);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto stats = compute();
  const std::lock_guard lock(mutex);
  return cache.emplace(key, std::move(stats)).first->second;
}

}  // namespace

std::optional<double> paired_bleu_p(const fs::path& system, const fs::path& baseline,
                                    const fs::path& reference) {
  const auto hyp = segments(system), base = segments(baseline), ref = segments(reference);
  if (!hyp || !base || !ref) return std::nullopt;
  if (hyp->size() != base->size() || hyp->size() != ref->size() || hyp->empty()) {
    log::warn("report: no paired test of {} against {}: {}, {} and {} lines ({})", system.string(),
              baseline.string(), hyp->size(), base->size(), ref->size(), reference.string());
    return std::nullopt;
  }
  const eval::Bleu bleu;
  return eval::paired_test(*bleu_stats(baseline, *base, reference, *ref),
                           *bleu_stats(system, *hyp, reference, *ref), eval::bleu_scorer(bleu))
      .p_value;
}

std::string heads_summary(const std::vector<int64_t>& heads) {
  return fmt::format("{}", fmt::join(heads, "/"));
}

Report write_report(const ReportOptions& o) {
  // The parses are checked before any run is analysed (minutes each), and a bad file is an error
  // here rather than a syntactic count of 0 there.
  if (o.analysis_sentences > 0 && !o.conllu.empty()) {
    HC_CHECK(!analysis::read_conllu(o.conllu).empty(), "{}: no sentence in the CoNLL-U file",
             o.conllu.string());
  }
  json manifest = read_manifest(o);
  Report r;
  r.splits = requested_splits(o);
  const std::string primary = r.splits.empty() ? "" : r.splits.back();
  for (const auto& a : manifest["axes"]) r.axes.push_back(a.get<std::string>());
  const std::optional<double> base_bleu = add_baseline_row(o, manifest, primary, r);
  for (const auto& p : manifest["points"]) {
    ReportRow row = point_row(o, manifest, p, primary, base_bleu, r);
    r.rows.push_back(std::move(row));
  }
  compare_with_controls(primary, r);
  compare_with_baseline(primary, r);
  const Layout t = table_layout(primary, manifest.value("retrain", false), r);
  io::write_file_atomic(o.dir / "results.csv", render_csv(r, t));
  std::string md = render_markdown(r, t);
  if (o.plots) r.plots = write_plots(r, o.dir, base_bleu);
  md += plots_markdown(o, r);
  if (o.analysis_sentences > 0) {
    r.analysis_markdown = analysis_section(o, r);
    md += r.analysis_markdown;
  }
  r.markdown = md;
  io::write_file_atomic(o.dir / "results.md", md);
  return r;
}

}  // namespace headcount::sweep
