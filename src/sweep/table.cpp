// `headcount table`: tables of evaluated runs from their records.
#include "headcount/sweep/table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/provenance.h"
#include "headcount/eval/record.h"
#include "headcount/run/run_folder.h"
#include "headcount/sweep/report.h"
#include "headcount/sweep/reproduce.h"
#include "sweep/sweep_yaml.h"

namespace headcount::sweep {
namespace {

using detail::check_keys;
using detail::string_list;
using detail::where;

std::string scalar(const YAML::Node& node, const fs::path& file, const std::string& key) {
  HC_CHECK(node && node.IsScalar() && !node.Scalar().empty(), "{}: {}: expected a text",
           node ? where(file, node) : file.string(), key);
  return node.Scalar();
}

TableSpec::Run read_run(const std::string& name, const YAML::Node& node, const fs::path& file) {
  TableSpec::Run r;
  r.name = r.label = name;
  std::string path;
  if (node.IsScalar()) {
    path = scalar(node, file, "runs: " + name);
  } else if (node["best_of"]) {
    check_keys(node, file, "runs: " + name, {"best_of", "on", "label"});
    r.best_of = string_list(node["best_of"], file, "runs: " + name + ": best_of");
    HC_CHECK(!r.best_of.empty(), "{}: runs: {}: best_of: expected a list of the file's runs",
             where(file, node["best_of"]), name);
    if (node["on"]) r.on = scalar(node["on"], file, "runs: " + name + ": on");
    if (node["label"]) r.label = scalar(node["label"], file, "runs: " + name + ": label");
    return r;
  } else {
    check_keys(node, file, "runs: " + name, {"path", "label", "eval", "summary"});
    path = scalar(node["path"], file, "runs: " + name + ": path");
    if (node["label"]) r.label = scalar(node["label"], file, "runs: " + name + ": label");
    if (node["eval"]) {
      r.eval = scalar(node["eval"], file, "runs: " + name + ": eval");
      HC_CHECK(r.eval.find("{split}") != std::string::npos,
               "{}: runs: {}: eval: expected a file name with {{split}} in it, without .json "
               "(e.g. compare-ft/eval-michel-finetuned-{{split}})",
               where(file, node["eval"]), name);
    }
    if (node["summary"]) r.summary = scalar(node["summary"], file, "runs: " + name + ": summary");
  }
  r.path = fs::absolute(file.parent_path() / path).lexically_normal();
  return r;
}

std::vector<std::string> run_names(const YAML::Node& node, const fs::path& file,
                                   const std::string& key, const std::set<std::string>& known) {
  const auto names = string_list(node, file, key);
  for (const auto& n : names)
    HC_CHECK(known.count(n), "{}: {}: '{}' is not one of the file's runs", where(file, node), key,
             n);
  return names;
}

// A run's evaluation files of a split without their extension (.json, .hyp.txt).
fs::path eval_stem(const TableSpec::Run& run, const std::string& split) {
  std::string stem = run.eval;
  for (size_t at; (at = stem.find("{split}")) != std::string::npos;) stem.replace(at, 7, split);
  return run.path / stem;
}

// A split's evaluation of a run: its record and translations.
struct Evaluation {
  eval::EvalRecord record;
  fs::path hyp;  // empty: not kept
};

Evaluation evaluation(const TableSpec::Run& run, const std::string& split) {
  const fs::path stem = eval_stem(run, split);
  const fs::path file = stem.string() + ".json";
  auto record = eval::read_eval_record(file);
  HC_CHECK(record.has_value(), "run {}: no {} (`headcount eval --split {} --out {}`)", run.name,
           file.string(), split, file.string());
  Evaluation e{*record, {}};
  const fs::path hyp = stem.string() + ".hyp.txt";
  std::error_code ec;
  if (fs::is_regular_file(hyp, ec)) e.hyp = hyp;
  return e;
}

// The scores against the first reference ("ref1"; a record may also hold ref2..., all_refs).
std::optional<double> first_score(const eval::EvalRecord& r, bool chrf, const char* name = "ref1") {
  const auto* s = r.score(name);
  if (!s) return std::nullopt;
  return chrf ? s->chrf : s->bleu;
}

// The evaluations read so far, per run and split (each file read once); a best-of run's are its
// chosen member's.
struct Evaluations {
  std::map<std::string, const TableSpec::Run*> runs;
  std::map<std::string, std::map<std::string, Evaluation>> read;
  std::map<std::string, std::string> chosen;  // best-of run -> its member
  // The run whose records stand for `name`: itself, or a best-of run's chosen member.
  const std::string& member(const std::string& name) {
    const auto* run = runs.at(name);
    if (run->best_of.empty()) return name;
    auto it = chosen.find(name);
    if (it != chosen.end()) return it->second;
    const std::string* best = &run->best_of.front();
    std::optional<double> top;
    for (const auto& m : run->best_of) {
      const auto v = first_score(of(m, run->on).record, false);
      if (v && (!top || *v > *top)) top = v, best = &m;
    }
    return chosen.emplace(name, *best).first->second;
  }
  const Evaluation& of(const std::string& name, const std::string& split) {
    const std::string& m = member(name);
    auto& per = read[m];
    auto it = per.find(split);
    if (it == per.end()) it = per.emplace(split, evaluation(*runs.at(m), split)).first;
    return it->second;
  }
  // How a table names a run: a best-of run with the member chosen.
  std::string shown(const std::string& name) {
    const std::string& m = member(name);
    return m == name ? name : fmt::format("{}: {}", name, m);
  }
};

std::string number(std::optional<double> v) {
  return v ? fmt::format("{:.2f}", *v) : "-";
}

// The BLEU difference of `run` against `other` on a split, with the paired bootstrap p-value
// where both kept their translations and the first reference file can be read.
std::string difference(const Evaluation& run, const Evaluation& other) {
  const auto a = first_score(run.record, false), b = first_score(other.record, false);
  if (!a || !b) return "-";
  const std::string cell = fmt::format("{:+.2f}", *a - *b);
  if (run.hyp.empty() || other.hyp.empty() || run.record.ref_files.empty()) return cell;
  const auto p = paired_bleu_p(run.hyp, other.hyp, run.record.ref_files.front());
  return p ? cell + fmt::format(" (p {:.3f})", *p) : cell;
}

// A table's title and the header of its columns (the first `texts` left-aligned, the rest
// figures).
std::string table_head(const std::string& title, const std::vector<std::string>& head,
                       size_t texts = 2) {
  std::string out = fmt::format("### {}\n\n| {} |\n|", title, fmt::join(head, " | "));
  for (size_t i = 0; i < head.size(); ++i) out += i < texts ? " --- |" : " ---: |";
  return out + "\n";
}

// A JSON line matches a figure's `where` when each named field's value reads as written there.
bool matches(const nlohmann::json& line, const TableSpec::Figure& f) {
  for (const auto& [field, text] : f.where) {
    if (!line.is_object() || !line.contains(field)) return false;
    const auto& v = line[field];
    if ((v.is_string() ? v.get<std::string>() : v.dump()) != text) return false;
  }
  return true;
}

std::string where_text(const TableSpec::Figure& f) {
  std::vector<std::string> parts;
  for (const auto& [field, text] : f.where) parts.push_back(field + " " + text);
  return fmt::format("{}", fmt::join(parts, ", "));
}

// A value of a record as the text cites it (a real number with the figure's decimals, anything
// else as is), read from `file` (JSON, or the last JSON line that matches); none if absent.
std::optional<std::string> read_value(const TableSpec::Figure& f, const fs::path& file) {
  std::optional<nlohmann::json> value;
  const auto take = [&](const nlohmann::json& j) {
    const nlohmann::json::json_pointer ptr(f.key);
    if (j.contains(ptr)) value = j.at(ptr);
  };
  if (file.extension() == ".jsonl") {
    const auto lines = run::read_jsonl(file);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (matches(*it, f)) {
        take(*it);
        break;
      }
  } else {
    take(nlohmann::json::parse(io::read_file(file)));
  }
  if (!value) return std::nullopt;
  if (value->is_number_float()) return fmt::format("{:.{}f}", value->get<double>(), f.digits);
  return value->is_string() ? value->get<std::string>() : value->dump();
}

std::string figure_value(const TableSpec::Figure& f) {
  const auto v = read_value(f, f.file);
  HC_CHECK(v.has_value(), "figure '{}': {} has no {}{}", f.label, f.file.string(), f.key,
           f.where.empty() ? "" : " in the last line with " + where_text(f));
  return *v;
}

// A run's cell of a further column: the value in the run's own file, "-" where it has none.
std::string column_value(const TableSpec::Figure& c, const TableSpec::Run& run) {
  const fs::path file = run.path / c.file;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return "-";
  return read_value(c, file).value_or("-");
}

// The n-gram precisions and brevity penalty of a split's BLEU against the first reference, from
// its bleu_verbose ("66.1/41.1/27.4/19.1 (BP = 0.965 ratio = ...)"): "66.1/41.1/27.4/19.1, BP
// 0.965"; "-" where the record has none.
std::string verbose_cell(const eval::EvalRecord& r) {
  const auto* s = r.score("ref1");
  if (!s) return "-";
  const std::string& v = s->bleu_verbose;
  const size_t open = v.find(" ("), bp = v.find("BP = ");
  if (open == std::string::npos || bp == std::string::npos) return "-";
  const size_t end = v.find(' ', bp + 5);  // npos: to the end (substr clamps the count)
  return v.substr(0, open) + ", BP " + v.substr(bp + 5, end - (bp + 5));
}

// The further scores' columns of a table: (score, split) where a row's evaluation has it.
std::vector<std::pair<std::string, std::string>> score_columns(const TableSpec& spec,
                                                               const TableSpec::Table& t,
                                                               Evaluations& evals) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [score, label] : spec.scores)
    for (const auto& s : spec.splits)
      for (const auto& name : t.rows)
        if (evals.of(name, s).record.score(score)) {
          out.emplace_back(score, s);
          break;
        }
  return out;
}

std::string result_table(const TableSpec& spec, const TableSpec::Table& t, Evaluations& evals) {
  std::vector<std::string> head = {"run", "heads e/d/de"};
  for (const auto& c : spec.columns) head.push_back(c.label);
  for (const auto& s : spec.splits) head.push_back(s + " BLEU");
  const auto extra = score_columns(spec, t, evals);
  std::map<std::string, std::string> labels(spec.scores.begin(), spec.scores.end());
  for (const auto& [score, s] : extra)
    head.push_back(fmt::format("{} BLEU ({})", s, labels[score]));
  for (const auto& s : spec.splits) head.push_back(s + " chrF");
  for (const auto& s : spec.verbose) head.push_back(s + " n-gram precisions, BP");
  for (const auto& a : t.against)
    for (const auto& s : spec.splits) head.push_back(fmt::format("vs {}, {}", a, s));
  std::string out = table_head(t.title, head);
  for (const auto& name : t.rows) {
    const auto* run = evals.runs.at(name);
    const std::string shown = evals.shown(name);
    std::vector<std::string> cells = {
        run->label == name ? shown : fmt::format("{} ({})", run->label, shown),
        evals.of(name, spec.splits.front()).record.heads_e_d_de};
    for (const auto& c : spec.columns)
      cells.push_back(column_value(c, *evals.runs.at(evals.member(name))));
    for (const auto& s : spec.splits)
      cells.push_back(number(first_score(evals.of(name, s).record, false)));
    for (const auto& [score, s] : extra)
      cells.push_back(number(first_score(evals.of(name, s).record, false, score.c_str())));
    for (const auto& s : spec.splits)
      cells.push_back(number(first_score(evals.of(name, s).record, true)));
    for (const auto& s : spec.verbose) cells.push_back(verbose_cell(evals.of(name, s).record));
    for (const auto& a : t.against)
      for (const auto& s : spec.splits)
        cells.push_back(a == name ? "" : difference(evals.of(name, s), evals.of(a, s)));
    out += fmt::format("| {} |\n", fmt::join(cells, " | "));
  }
  return out;
}

std::string pair_table(const TableSpec& spec, const TableSpec::Table& t, Evaluations& evals) {
  std::vector<std::string> head = {"run", "against"};
  for (const auto& s : spec.splits) head.push_back(s + " BLEU difference");
  std::string out = table_head(t.title, head);
  for (const auto& [run, other] : t.pairs) {
    std::vector<std::string> cells = {evals.shown(run), evals.shown(other)};
    for (const auto& s : spec.splits)
      cells.push_back(difference(evals.of(run, s), evals.of(other, s)));
    out += fmt::format("| {} |\n", fmt::join(cells, " | "));
  }
  return out;
}

// The runs' BLEU on a split, one per run (none where its record has no first-reference score).
std::vector<std::optional<double>> seed_scores(const std::vector<std::string>& runs,
                                               const std::string& split, Evaluations& evals) {
  std::vector<std::optional<double>> v;
  for (const auto& r : runs) v.push_back(first_score(evals.of(r, split).record, false));
  return v;
}

// The paired differences of one setting's runs against another's over the seeds both have.
SeedStats seed_difference(const std::vector<std::string>& runs,
                          const std::vector<std::string>& against, const std::string& split,
                          Evaluations& evals) {
  return seed_stats(
      paired_differences(seed_scores(runs, split, evals), seed_scores(against, split, evals)));
}

// Such a change as a cell, saying so where one setting has more seeds than are paired.
std::string seed_vs(const SeedStats& d, size_t runs, size_t against) {
  std::string cell = seed_change(d);
  if (runs != against && runs > 1 && against > 1)
    cell += fmt::format(" (first {} seeds)", std::min(runs, against));
  return cell;
}

std::string seed_table(const TableSpec& spec, const TableSpec::Table& t, Evaluations& evals) {
  std::vector<std::string> head = {"setting", "runs (one per seed)", "heads e/d/de"};
  for (const auto& s : spec.splits) head.push_back(s + " BLEU");
  for (const auto& a : t.against)
    for (const auto& s : spec.splits) head.push_back(fmt::format("vs {}, {}", a, s));
  std::string out = table_head(t.title, head);
  std::map<std::string, const std::vector<std::string>*> rows;
  for (const auto& [row, runs] : t.seeds) rows[row] = &runs;
  for (const auto& [row, runs] : t.seeds) {
    std::vector<std::string> shown, heads;
    for (const auto& r : runs) {
      shown.push_back(evals.shown(r));
      const std::string& h = evals.of(r, spec.splits.front()).record.heads_e_d_de;
      if (std::find(heads.begin(), heads.end(), h) == heads.end()) heads.push_back(h);
    }
    std::vector<std::string> cells = {row, fmt::format("{}", fmt::join(shown, ", ")),
                                      fmt::format("{}", fmt::join(heads, ", "))};
    for (const auto& s : spec.splits) {
      std::vector<double> v;
      for (const auto& b : seed_scores(runs, s, evals))
        if (b) v.push_back(*b);
      cells.push_back(seed_mean_sd(seed_stats(v)));
    }
    for (const auto& a : t.against)
      for (const auto& s : spec.splits)
        cells.push_back(a == row ? ""
                                 : seed_vs(seed_difference(runs, *rows.at(a), s, evals),
                                           runs.size(), rows.at(a)->size()));
    out += fmt::format("| {} |\n", fmt::join(cells, " | "));
  }
  return out +
         "\nMean ± sample standard deviation over the seeds; \"vs ROW\": the mean ± standard "
         "deviation of the paired differences (the i-th run of both rows; a row of one run is "
         "paired with each of the other's) with the two-sided p-value of a paired t test over the "
         "seeds; \"first K seeds\" where the rows have different numbers of seeds and only the "
         "first K are paired.\n";
}

// A goal's change and the mean it is judged on (none without values): with one run on each side
// their difference with the paired bootstrap p-value, otherwise the seeds' paired differences.
std::pair<std::string, std::optional<double>> goal_change(const TableSpec::Goal& g,
                                                          Evaluations& evals) {
  if (g.runs.size() == 1 && g.against.size() == 1) {
    const Evaluation& a = evals.of(g.runs.front(), g.split);
    const Evaluation& b = evals.of(g.against.front(), g.split);
    const auto x = first_score(a.record, false), y = first_score(b.record, false);
    if (!x || !y) return {"-", std::nullopt};
    return {difference(a, b), *x - *y};
  }
  const SeedStats d = seed_difference(g.runs, g.against, g.split, evals);
  if (d.n == 0) return {"-", std::nullopt};
  return {seed_vs(d, g.runs.size(), g.against.size()) +
              fmt::format(", {} pair{}", d.n, d.n == 1 ? "" : "s"),
          d.mean};
}

std::string goal_table(const TableSpec::Table& t, Evaluations& evals) {
  std::string out =
      table_head(t.title, {"goal", "runs", "against", "split", "change", "needed", "met"}, 4);
  for (const auto& g : t.goals) {
    std::vector<std::string> runs, against;
    for (const auto& r : g.runs) runs.push_back(evals.shown(r));
    for (const auto& r : g.against) against.push_back(evals.shown(r));
    const auto [change, mean] = goal_change(g, evals);
    // Compared at the printed precision: a change shown as -0.50 meets "at least -0.50".
    const double m = mean ? std::round(*mean * 100) / 100 : 0, b = std::round(g.bound * 100) / 100;
    const char* met = !mean ? "missing" : (g.strict ? m > b : m >= b) ? "yes" : "no";
    out +=
        fmt::format("| {} | {} | {} | {} | {} | {} {:+.2f} | {} |\n", g.text, fmt::join(runs, ", "),
                    fmt::join(against, ", "), g.split, change, g.strict ? ">" : "≥", g.bound, met);
  }
  return out +
         "\nA change over several seeds: the mean ± standard deviation of the paired differences "
         "(the i-th run with the i-th; a single run is paired with each) with the two-sided "
         "p-value of a paired t test over the seeds; with one run on each side, the difference "
         "with the paired bootstrap p-value over the split's sentences. A goal is met where the "
         "mean change, to two decimals, reaches the bound; the p-value says how far noise could "
         "account for it.\n";
}

std::string figure_table(const TableSpec& spec, const TableSpec::Table& t) {
  std::string out = table_head(t.title, {"figure", "source", "value"});
  const fs::path base = spec.file.parent_path();
  for (const auto& f : t.figures) {
    std::string source = fmt::format("`{}` {}", fs::relative(f.file, base).string(), f.key);
    if (!f.where.empty()) source += " (" + where_text(f) + ")";
    out += fmt::format("| {} | {} | {} |\n", f.label, source, figure_value(f));
  }
  return out;
}

// Where each run was trained (its summary.json's provenance) and decoded (its evaluation's), as
// provenance::describe gives them (commit, CPU and its flags, GPU, LibTorch).
std::string where_table(const TableSpec& spec, const Evaluations& evals) {
  std::string out =
      "### Where the runs ran\n\n| run | steps | training minutes | trained on | decoded on | "
      "decoding |\n| --- | ---: | ---: | --- | --- | --- |\n";
  for (const auto& run : spec.runs) {
    const auto it = evals.read.find(run.name);
    if (it == evals.read.end()) continue;
    nlohmann::json summary;
    std::error_code ec;
    if (fs::is_regular_file(run.path / run.summary, ec))
      summary = nlohmann::json::parse(io::read_file(run.path / run.summary));
    const std::string steps =
        summary.contains("steps") ? fmt::format("{}", summary["steps"].get<int64_t>()) : "-";
    const std::string minutes =
        summary.contains("train_seconds")
            ? fmt::format("{:.1f}", summary["train_seconds"].get<double>() / 60.0)
            : "-";
    const std::string trained =
        summary.is_object() ? provenance::describe(summary.value("provenance", nlohmann::json()))
                            : "-";
    const Evaluation& e = it->second.begin()->second;
    out += fmt::format("| {} | {} | {} | {} | {} | {}, beam {} |\n", run.name, steps, minutes,
                       trained, provenance::describe(e.record.provenance),
                       e.record.precision.empty() ? "precision unrecorded" : e.record.precision,
                       e.record.beam);
  }
  return out;
}

// A table's `figures:` (each {label, file, key, where, digits}, its file there) or the file's
// `columns:` (`in_runs`: each file relative to a run's folder, which may lack it).
std::vector<TableSpec::Figure> read_figures(const YAML::Node& node, const fs::path& file,
                                            const std::string& key, bool in_runs) {
  HC_CHECK(node.IsSequence() && node.size() > 0, "{}: {}: expected a list of {{label, file, key}}",
           where(file, node), key);
  std::vector<TableSpec::Figure> out;
  for (const auto& f : node) {
    check_keys(f, file, key, {"label", "file", "key", "where", "digits"});
    TableSpec::Figure fig;
    fig.label = scalar(f["label"], file, key + ": label");
    const std::string what = key + ": " + fig.label;
    fig.key = scalar(f["key"], file, what + ": key");
    bool pointer = true;  // nlohmann refuses text without a leading '/' or with a bad escape
    try {
      (void)nlohmann::json::json_pointer(fig.key);
    } catch (const nlohmann::json::exception&) {
      pointer = false;
    }
    HC_CHECK(pointer, "{}: {}: key: expected a JSON pointer (/field/sub), got '{}'",
             where(file, f["key"]), what, fig.key);
    fig.file = scalar(f["file"], file, what + ": file");
    if (!in_runs) fig.file = fs::absolute(file.parent_path() / fig.file).lexically_normal();
    std::error_code ec;
    HC_CHECK(in_runs || fs::is_regular_file(fig.file, ec), "{}: {}: file: no {}",
             where(file, f["file"]), what, fig.file.string());
    if (const YAML::Node w = f["where"]) {
      HC_CHECK(w.IsMap(), "{}: {}: where: expected a map of fields to values ({{step: 600}})",
               where(file, w), what);
      for (const auto& kv : w)
        fig.where.emplace_back(scalar(kv.first, file, what + ": where"),
                               scalar(kv.second, file, what + ": where: " + kv.first.Scalar()));
    }
    if (const YAML::Node d = f["digits"]) {
      const std::string text = scalar(d, file, what + ": digits");
      HC_CHECK(text.size() == 1 && std::isdigit(static_cast<unsigned char>(text[0])),
               "{}: {}: digits: expected 0 to 9, got '{}'", where(file, d), what, text);
      fig.digits = text[0] - '0';
    }
    out.push_back(fig);
  }
  return out;
}

// The keys of a table file that shape the rows' columns: splits, scores, verbose, columns.
void read_columns(const YAML::Node& root, TableSpec& spec) {
  const fs::path& file = spec.file;
  if (root["columns"]) spec.columns = read_figures(root["columns"], file, "columns", true);
  if (root["splits"]) {
    spec.splits = string_list(root["splits"], file, "splits");
    HC_CHECK(!spec.splits.empty(), "{}: splits: expected at least one split (dev, test)",
             where(file, root["splits"]));
  }
  if (const YAML::Node scores = root["scores"]) {
    HC_CHECK(
        scores.IsMap(),
        "{}: scores: expected a map of an evaluation's score names to column labels (all_refs: "
        "WEB+KJV)",
        where(file, scores));
    for (const auto& kv : scores)
      spec.scores.emplace_back(scalar(kv.first, file, "scores"),
                               scalar(kv.second, file, "scores: " + kv.first.Scalar()));
  }
  if (root["verbose"]) {
    spec.verbose = string_list(root["verbose"], file, "verbose");
    for (const auto& v : spec.verbose)
      HC_CHECK(std::find(spec.splits.begin(), spec.splits.end(), v) != spec.splits.end(),
               "{}: verbose: '{}' is not one of the splits ({})", where(file, root["verbose"]), v,
               fmt::join(spec.splits, ", "));
  }
}

// A table over seeds: `seeds: {ROW: [RUN, ...]}` (the i-th run of every row has seed i) and
// `against` naming its rows.
void read_seed_table(const YAML::Node& t, const fs::path& file, const std::set<std::string>& known,
                     TableSpec::Table& table) {
  const YAML::Node seeds = t["seeds"];
  const std::string key = "tables: " + table.title + ": seeds";
  HC_CHECK(seeds.IsMap() && seeds.size() > 0,
           "{}: {}: expected a map of rows to lists of the file's runs, one per seed "
           "(control: [control-s1, control-s2])",
           where(file, seeds), key);
  std::set<std::string> rows;
  for (const auto& kv : seeds) {
    const std::string row = scalar(kv.first, file, key);
    const auto runs = run_names(kv.second, file, key + ": " + row, known);
    HC_CHECK(!runs.empty() && rows.insert(row).second,
             "{}: {}: {}: expected a row named once with at least one run", where(file, kv.first),
             key, row);
    table.seeds.emplace_back(row, runs);
  }
  if (!t["against"]) return;
  const std::string against = "tables: " + table.title + ": against";
  table.against = string_list(t["against"], file, against);
  for (const auto& a : table.against)
    HC_CHECK(rows.count(a), "{}: {}: '{}' is not one of the table's rows",
             where(file, t["against"]), against, a);
}

// A table of goals: `goals: [{goal, runs, against, split, at_least | above}]`.
void read_goals(const YAML::Node& node, const fs::path& file, const std::set<std::string>& known,
                const std::vector<std::string>& splits, TableSpec::Table& table) {
  const std::string key = "tables: " + table.title + ": goals";
  HC_CHECK(node.IsSequence() && node.size() > 0,
           "{}: {}: expected a list of {{goal, runs, against, split, at_least or above}}",
           where(file, node), key);
  for (const auto& n : node) {
    check_keys(n, file, key, {"goal", "runs", "against", "split", "at_least", "above"});
    TableSpec::Goal g;
    g.text = scalar(n["goal"], file, key + ": goal");
    const std::string what = key + ": " + g.text;
    for (auto [side, list] : {std::pair{"runs", &g.runs}, std::pair{"against", &g.against}}) {
      HC_CHECK(n[side], "{}: {}: expected {} (a list of the file's runs, one per seed)",
               where(file, n), what, side);
      *list = run_names(n[side], file, what + ": " + side, known);
      HC_CHECK(!list->empty(), "{}: {}: {}: expected at least one run", where(file, n[side]), what,
               side);
    }
    g.split = scalar(n["split"], file, what + ": split");
    HC_CHECK(std::find(splits.begin(), splits.end(), g.split) != splits.end(),
             "{}: {}: split: '{}' is not one of the splits ({})", where(file, n["split"]), what,
             g.split, fmt::join(splits, ", "));
    HC_CHECK(!n["at_least"] != !n["above"],
             "{}: {}: expected at_least (the mean change may equal the bound) or above (it must "
             "exceed it), one of them",
             where(file, n), what);
    g.strict = static_cast<bool>(n["above"]);
    const char* bound = g.strict ? "above" : "at_least";
    const std::string text = scalar(n[bound], file, what + ": " + bound);
    char* end = nullptr;
    g.bound = std::strtod(text.c_str(), &end);
    HC_CHECK(end && *end == '\0' && std::isfinite(g.bound),
             "{}: {}: {}: expected a number of BLEU points (-0.5), got '{}'", where(file, n[bound]),
             what, bound, text);
    table.goals.push_back(std::move(g));
  }
}

TableSpec::Table read_table(const YAML::Node& t, const fs::path& file,
                            const std::set<std::string>& known,
                            const std::vector<std::string>& splits) {
  check_keys(t, file, "tables", {"title", "against", "rows", "pairs", "figures", "seeds", "goals"});
  TableSpec::Table table;
  table.title = scalar(t["title"], file, "tables: title");
  HC_CHECK(!t["rows"] + !t["pairs"] + !t["figures"] + !t["seeds"] + !t["goals"] == 4,
           "{}: tables: {}: expected rows (a list of the file's runs), pairs (a list of "
           "[RUN, OTHER]), figures (a list of values read from records), seeds (a map of rows "
           "to their runs, one per seed) or goals (a list of goals checked on the runs), one of "
           "them",
           where(file, t), table.title);
  if (t["goals"]) {
    HC_CHECK(!t["against"], "{}: tables: {}: against: a table of goals names them in each goal",
             where(file, t["against"]), table.title);
    read_goals(t["goals"], file, known, splits, table);
  } else if (t["figures"]) {
    table.figures = read_figures(t["figures"], file, "tables: figures", false);
  } else if (t["seeds"]) {
    read_seed_table(t, file, known, table);
  } else if (t["pairs"]) {
    const YAML::Node pairs = t["pairs"];
    HC_CHECK(pairs.IsSequence() && pairs.size() > 0,
             "{}: tables: pairs: expected a list of [RUN, OTHER]", where(file, pairs));
    for (const auto& p : pairs) {
      const auto two = run_names(p, file, "tables: pairs", known);
      HC_CHECK(p.IsSequence() && two.size() == 2,
               "{}: tables: pairs: expected [RUN, OTHER], two of the file's runs", where(file, p));
      table.pairs.emplace_back(two[0], two[1]);
    }
  } else {
    table.rows = run_names(t["rows"], file, "tables: rows", known);
    if (t["against"]) table.against = run_names(t["against"], file, "tables: against", known);
  }
  return table;
}

}  // namespace

TableSpec load_table_spec(const fs::path& path) {
  TableSpec spec;
  spec.file = fs::absolute(path);
  const fs::path& file = spec.file;
  const YAML::Node root = detail::read_yaml_file(file, "table file", "a map with runs and tables");
  check_keys(root, file, "the table file",
             {"splits", "scores", "columns", "verbose", "runs", "tables"});
  read_columns(root, spec);
  // Runs may be left out of a file of figures alone (rows and pairs then name no known run).
  const YAML::Node runs = root["runs"] ? root["runs"] : YAML::Node(YAML::NodeType::Map);
  HC_CHECK(runs.IsMap() && (runs.size() > 0 || !root["runs"]),
           "{}: runs: expected a map of names to run folders", file.string());
  std::set<std::string> known;
  for (const auto& kv : runs) {
    const std::string name = kv.first.Scalar();
    HC_CHECK(known.insert(name).second, "{}: runs: '{}' is named twice", where(file, kv.first),
             name);
    spec.runs.push_back(read_run(name, kv.second, file));
  }
  const YAML::Node tables = root["tables"];
  HC_CHECK(tables && tables.IsSequence() && tables.size() > 0,
           "{}: tables: expected a list of tables, each with a title and rows", file.string());
  for (const auto& t : tables) spec.tables.push_back(read_table(t, file, known, spec.splits));
  for (auto& run : spec.runs) {
    if (run.best_of.empty()) continue;
    if (run.on.empty()) run.on = spec.splits.front();
    HC_CHECK(std::find(spec.splits.begin(), spec.splits.end(), run.on) != spec.splits.end(),
             "{}: runs: {}: on: '{}' is not one of the splits ({})", file.string(), run.name,
             run.on, fmt::join(spec.splits, ", "));
    for (const auto& m : run.best_of) {
      const auto it = std::find_if(spec.runs.begin(), spec.runs.end(),
                                   [&](const TableSpec::Run& r) { return r.name == m; });
      HC_CHECK(it != spec.runs.end() && it->best_of.empty(),
               "{}: runs: {}: best_of: '{}' is not one of the file's runs with records",
               file.string(), run.name, m);
    }
  }
  for (const auto& run : spec.runs)
    for (const auto& split : spec.splits) {
      if (!run.best_of.empty()) continue;
      std::error_code ec;
      const fs::path e = eval_stem(run, split).string() + ".json";
      HC_CHECK(fs::is_regular_file(e, ec), "{}: runs: {}: no {} (an evaluated run folder)",
               file.string(), run.name, e.string());
    }
  return spec;
}

std::string render_tables(const TableSpec& spec) {
  Evaluations evals;
  for (const auto& r : spec.runs) evals.runs[r.name] = &r;
  std::string out;
  for (const auto& t : spec.tables)
    out += (!t.figures.empty() ? figure_table(spec, t)
            : !t.goals.empty() ? goal_table(t, evals)
            : !t.seeds.empty() ? seed_table(spec, t, evals)
            : t.pairs.empty()  ? result_table(spec, t, evals)
                               : pair_table(spec, t, evals)) +
           "\n";
  if (evals.read.empty()) return out;  // figures alone
  out +=
      "BLEU and chrF of the first reference; \"vs RUN\": the BLEU difference with the p-value "
      "of a paired bootstrap test (1000 resamples, seed 12345; `headcount bleu HYP REF "
      "--paired-bs OTHER_HYP`) where both runs kept their translations.\n\n";
  out += where_table(spec, evals);
  return out;
}

}  // namespace headcount::sweep
