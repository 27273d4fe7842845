// OUT/results.md of `headcount reproduce`: the seeds of every cell gathered (mean, standard
// deviation, paired differences and their t test), the goals checked, and where each figure was
// computed (commit, machine, LibTorch, precision).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/provenance.h"
#include "headcount/eval/record.h"
#include "headcount/prune/outcome.h"
#include "headcount/run/run_folder.h"
#include "headcount/sweep/reproduce.h"

namespace headcount::sweep {
namespace {

using json = nlohmann::json;

// The continued fraction of the regularised incomplete beta function (modified Lentz).
double beta_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    for (int pass = 0; pass < 2; ++pass) {
      d = 1 + aa * d;
      if (std::fabs(d) < kTiny) d = kTiny;
      c = 1 + aa / c;
      if (std::fabs(c) < kTiny) c = kTiny;
      d = 1 / d;
      const double del = c * d;
      h *= del;
      if (pass == 1 && std::fabs(del - 1) < kEps) return h;
      aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    }
  }
  return h;
}

// I_x(a, b).
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

}  // namespace

double t_test_two_sided_p(double t, double df) {
  HC_CHECK(df > 0, "t test: {} degrees of freedom", df);
  if (!std::isfinite(t)) return 0;
  return incomplete_beta(df / 2, 0.5, df / (df + t * t));
}

SeedStats seed_stats(const std::vector<double>& v) {
  SeedStats s;
  s.n = v.size();
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  if (v.size() < 2) return s;
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  const double se = *s.sd / std::sqrt(static_cast<double>(v.size()));
  if (se > 0)
    s.p = t_test_two_sided_p(s.mean / se, static_cast<double>(v.size() - 1));
  else
    s.p = s.mean == 0 ? 1.0 : 0.0;
  return s;
}

std::vector<double> paired_differences(const std::vector<std::optional<double>>& run,
                                       const std::vector<std::optional<double>>& against) {
  std::vector<double> d;
  if (run.empty() || against.empty()) return d;
  const size_t n = run.size() == 1 || against.size() == 1 ? std::max(run.size(), against.size())
                                                          : std::min(run.size(), against.size());
  for (size_t k = 0; k < n; ++k) {
    const auto& r = run[run.size() == 1 ? 0 : k];
    const auto& a = against[against.size() == 1 ? 0 : k];
    if (r && a) d.push_back(*r - *a);
  }
  return d;
}

std::string seed_mean_sd(const SeedStats& s) {
  if (s.n == 0) return "missing";
  if (!s.sd) return fmt::format("{:.2f}", s.mean);
  return fmt::format("{:.2f} ± {:.2f}", s.mean, *s.sd);
}

std::string seed_change(const SeedStats& s) {
  if (s.n == 0) return "";
  std::string t = fmt::format("{:+.2f}", s.mean);
  if (s.sd) t += fmt::format(" ± {:.2f}", *s.sd);
  if (s.p) t += fmt::format(" (p {:.3f})", *s.p);
  return t;
}

namespace {

// One model of one seed: its heads and its BLEU per split, with where it was decoded.
struct Cell {
  std::optional<std::array<int64_t, 3>> heads;
  std::map<std::string, double> bleu;
  std::set<std::string> machines;  // provenance::describe of its evaluations
};

std::optional<std::array<int64_t, 3>> parse_heads(const std::string& s) {
  std::array<int64_t, 3> h{};
  char a = 0, b = 0;
  std::istringstream in(s);
  if (in >> h[0] >> a >> h[1] >> b >> h[2] && a == '/' && b == '/') return h;
  return std::nullopt;
}

Cell read_cell(const fs::path& dir, const std::string& prefix,
               const std::vector<std::string>& splits,
               std::optional<std::array<int64_t, 3>> heads) {
  Cell c;
  c.heads = heads;
  for (const auto& split : splits) {
    const auto rec = eval::read_eval_record(dir / (prefix + split + ".json"));
    if (!rec) continue;
    if (!c.heads) c.heads = parse_heads(rec->heads_e_d_de);
    if (const auto* ref1 = rec->score("ref1"); ref1 && ref1->bleu)
      c.bleu[split] = *ref1->bleu;  // against the split's first reference
    const std::string where =
        rec->provenance.is_null()
            ? "machine and commit not recorded (evaluated before runs recorded them)"
            : provenance::describe(rec->provenance);
    c.machines.insert(where + ", " +
                      (rec->precision.empty() ? "precision not recorded" : rec->precision));
  }
  return c;
}

// A row of the gathered table: the same model over the seeds, and the row it is compared with.
struct Row {
  std::string name, kind, against;  // kind: baseline, control, pruned, scratch, michel
  std::vector<Cell> seeds;          // one per seed (the baseline: one)
};

std::vector<Row> gather(const ExperimentSpec& e, const fs::path& out) {
  std::vector<Row> rows;
  rows.push_back(
      {"baseline", "baseline", "", {read_cell(out / "baseline", "eval-", e.splits, {})}});
  const SweepSpec s1 = seed_sweep(e, out, 1);
  for (const auto& p : s1.points) {
    Row r{p.name, p.is_control ? "control" : "pruned", p.is_control ? "baseline" : p.control, {}};
    Row scratch{p.name + "/scratch", "scratch", p.name, {}};
    Row michel{p.name + " Michel+FT", "michel", p.name, {}};
    for (int seed = 1; seed <= e.seeds; ++seed) {
      const fs::path run = out / fmt::format("seed-{}", seed) / p.name;
      std::optional<std::array<int64_t, 3>> heads;
      std::error_code ec;
      if (fs::exists(run::RunFolder{run}.pruning(), ec))
        heads = parse_heads(prune::read_prune_outcome(run).heads_after);
      r.seeds.push_back(read_cell(run, "eval-", e.splits, heads));
      scratch.seeds.push_back(read_cell(run / "scratch", "eval-", e.splits, heads));
      michel.seeds.push_back(
          read_cell(run / "compare-ft", "eval-michel-finetuned-", e.splits, heads));
    }
    rows.push_back(r);
    if (std::find(e.scratch_runs.begin(), e.scratch_runs.end(), p.name) != e.scratch_runs.end())
      rows.push_back(scratch);
    if (p.name.rfind("target-", 0) == 0) rows.push_back(michel);
  }
  return rows;
}

const Row* find_row(const std::vector<Row>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.name == name) return &r;
  return nullptr;
}

// The row's values on a split, one per seed that has it.
std::vector<double> values(const Row& r, const std::string& split) {
  std::vector<double> v;
  for (const auto& c : r.seeds)
    if (c.bleu.count(split)) v.push_back(c.bleu.at(split));
  return v;
}

// The row's value on a split per seed (none where a seed lacks it).
std::vector<std::optional<double>> per_seed(const Row& r, const std::string& split) {
  std::vector<std::optional<double>> v;
  for (const auto& c : r.seeds)
    v.push_back(c.bleu.count(split) ? std::optional<double>(c.bleu.at(split)) : std::nullopt);
  return v;
}

// Paired differences row - against, seed by seed (the baseline: the same for every seed).
std::vector<double> differences(const Row& r, const Row& against, const std::string& split) {
  return paired_differences(per_seed(r, split), per_seed(against, split));
}

std::string heads_text(const Row& r) {
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const auto& c : r.seeds)
    if (c.heads) {
      const auto t = fmt::format("{}/{}/{}", (*c.heads)[0], (*c.heads)[1], (*c.heads)[2]);
      if (seen.insert(t).second) out.push_back(t);
    }
  return out.empty() ? "-" : fmt::format("{}", fmt::join(out, ", "));
}

std::string table(const ExperimentSpec& e, const std::vector<Row>& rows, json& numbers) {
  std::string md = "| run | compared with | heads (enc/dec/enc-dec) |";
  std::string sep = "| --- | --- | --- |";
  for (const auto& s : e.splits) {
    md += fmt::format(" {} BLEU | {} change |", s, s);
    sep += " ---: | ---: |";
  }
  md += "\n" + sep + "\n";
  for (const auto& r : rows) {
    const Row* against = find_row(rows, r.against);
    md +=
        fmt::format("| {} | {} | {} |", r.name, r.against.empty() ? "-" : r.against, heads_text(r));
    json& n = numbers[r.name];
    n["kind"] = r.kind;
    n["against"] = r.against;
    n["heads"] = heads_text(r);
    for (const auto& split : e.splits) {
      const SeedStats v = seed_stats(values(r, split));
      const SeedStats d = against ? seed_stats(differences(r, *against, split)) : SeedStats{};
      md += fmt::format(" {} | {} |", seed_mean_sd(v), seed_change(d));
      n[split] = {{"n", v.n}, {"mean", v.mean}, {"sd", v.sd ? json(*v.sd) : json()}};
      if (d.n)
        n[split + "_change"] = {{"n", d.n},
                                {"mean", d.mean},
                                {"sd", d.sd ? json(*d.sd) : json()},
                                {"p", d.p ? json(*d.p) : json()}};
    }
    md += "\n";
  }
  return md;
}

}  // namespace

namespace {

// Training wall time of a run folder (its summary.json's train_seconds), if it has one. The
// committed records keep Michel's fine-tuning flattened (compare-ft/michel-finetuned-summary.json).
std::optional<double> train_seconds(const std::vector<fs::path>& candidates) {
  std::error_code ec;
  for (const auto& f : candidates) {
    if (!fs::exists(f, ec)) continue;
    const auto j = json::parse(io::read_file(f), nullptr, false);
    HC_CHECK(!j.is_discarded() && j.is_object(), "{}: not a JSON object", f.string());
    if (j.contains("train_seconds") && j["train_seconds"].is_number())
      return j["train_seconds"].get<double>();
  }
  return std::nullopt;
}

// The training time of every row and of each kind, from the runs' summary.json files.
std::string compute_section(const fs::path& out, const std::vector<Row>& rows, json& numbers) {
  std::map<std::string, std::pair<int, double>> by_kind;  // kind -> (runs, seconds)
  std::string md =
      "\n## Compute\n\nTraining wall time (each run's `summary.json`, `train_seconds`: time "
      "spent sharing the cores counts; evaluations not included), in minutes, the mean over the "
      "seeds that have it:\n\n| run | runs | minutes |\n| --- | ---: | ---: |\n";
  for (const auto& r : rows) {
    std::vector<double> minutes;
    for (int seed = 1; seed <= static_cast<int>(r.seeds.size()); ++seed) {
      const fs::path run = out / fmt::format("seed-{}", seed);
      const std::string base = r.name.substr(0, r.name.find_first_of(" /"));
      std::vector<fs::path> files;
      if (r.kind == "baseline") files = {out / "baseline" / "summary.json"};
      if (r.kind == "control" || r.kind == "pruned") files = {run / base / "summary.json"};
      if (r.kind == "scratch") files = {run / base / "scratch" / "summary.json"};
      if (r.kind == "michel")
        files = {run / base / "compare-ft" / "michel-finetuned" / "summary.json",
                 run / base / "compare-ft" / "michel-finetuned-summary.json"};
      if (const auto t = train_seconds(files)) minutes.push_back(*t / 60);
    }
    if (minutes.empty()) continue;
    const SeedStats m = seed_stats(minutes);
    auto& k = by_kind[r.kind];
    k.first += static_cast<int>(minutes.size());
    k.second += m.mean * 60 * static_cast<double>(minutes.size());
    numbers[r.name]["train_minutes"] = m.mean;
    md += fmt::format("| {} | {} | {:.1f} |\n", r.name, minutes.size(), m.mean);
  }
  int runs = 0;
  double total = 0;
  md += "\n| kind | runs | hours |\n| --- | ---: | ---: |\n";
  for (const auto& [kind, k] : by_kind) {
    md += fmt::format("| {} | {} | {:.1f} |\n", kind, k.first, k.second / 3600);
    runs += k.first;
    total += k.second;
  }
  md += fmt::format("| all | {} | {:.1f} |\n", runs, total / 3600);
  return md;
}

std::string seed_report_text(const ExperimentSpec& e, const fs::path& out,
                             const std::string& shown_out, json& numbers) {
  const auto rows = gather(e, out);
  std::string md = fmt::format("# {}{}: {} seed(s)\n\n", e.file.string(),
                               e.profile.empty() ? "" : ", profile " + e.profile, e.seeds);
  md += fmt::format(
      "Generated by `headcount reproduce {}{} --out {}` from the run folders; every figure below "
      "is BLEU (first reference, beam {}) on all sentences of the split. With several seeds a cell "
      "is the mean ± the standard deviation over the seeds, and a change is the mean ± the "
      "standard deviation of the paired differences (the same seed of the run and of what it is "
      "compared with) with the two-sided p-value of a paired t test over the seeds. Each seed's "
      "own table, with paired bootstrap p-values over the test sentences: "
      "`seed-S/results.md`.\n\n",
      e.file.string(), e.profile.empty() ? "" : " --profile " + e.profile, shown_out, e.beam);
  md += table(e, rows, numbers);
  md += "\n" + goals_section(e, numbers);
  std::set<std::string> machines;
  for (const auto& r : rows)
    for (const auto& c : r.seeds) machines.insert(c.machines.begin(), c.machines.end());
  md += "\n## Where the evaluations ran\n\n";
  for (const auto& m : machines) md += "- " + m + "\n";
  if (machines.size() > 1)
    md +=
        "\nThe rows were decoded on more than one machine or build: a change between rows "
        "decoded apart mixes the machines (0.03-0.2 BLEU between precisions and kernels).\n";
  md +=
      "\nNo speed is given here: speeds of different machines are not comparable; `headcount "
      "bench decode --compare` measures a pruned model against its baseline in one run.\n";
  md += compute_section(out, rows, numbers);
  md += pieces_section(out);
  return md;
}

}  // namespace

std::vector<json> step_markers(const fs::path& out) {
  std::vector<json> markers;
  std::error_code ec;
  if (!fs::is_directory(out / "steps", ec)) return markers;
  for (const auto& f : fs::directory_iterator(out / "steps", ec)) {
    if (f.path().extension() != ".json") continue;
    try {
      markers.push_back(json::parse(io::read_file(f.path())));
    } catch (const std::exception&) {
      // not a marker (markers are written whole, renamed into place): left out
    }
  }
  return markers;
}

std::string utc_clock(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

std::optional<std::time_t> parse_utc_clock(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return timegm(&tm);
}

namespace {

// The wall clock of the pieces: one span, or where the experiment was resumed after a pause (a gap
// of more than kResumeGap between pieces) the spans it ran in.
std::string wall_clock_text(std::vector<std::pair<std::time_t, std::time_t>> runs) {
  constexpr std::time_t kResumeGap = 600;
  if (runs.empty()) return "";
  std::sort(runs.begin(), runs.end());
  std::vector<std::pair<std::time_t, std::time_t>> spans{runs.front()};
  for (const auto& [begun, done] : runs) {
    if (begun > spans.back().second + kResumeGap)
      spans.push_back({begun, done});
    else
      spans.back().second = std::max(spans.back().second, done);
  }
  const auto minutes = [](std::time_t a, std::time_t b) { return static_cast<double>(b - a) / 60; };
  const std::time_t start = spans.front().first, end = spans.back().second;
  std::string t = fmt::format("\nWall clock: {} to {} UTC, {:.1f} minutes", utc_clock(start),
                              utc_clock(end), minutes(start, end));
  if (spans.size() == 1) return t + ".\n";
  double busy = 0;
  std::string list;
  for (const auto& [a, b] : spans) {
    busy += minutes(a, b);
    list += fmt::format("{}{} to {} ({:.1f} minutes)", list.empty() ? "" : "; ", utc_clock(a),
                        utc_clock(b), minutes(a, b));
  }
  return t + fmt::format(
                 ", resumed {} time(s) after a pause: the pieces ran in {} stretches of {:.1f} "
                 "minutes together: {}.\n",
                 spans.size() - 1, spans.size(), busy, list);
}

}  // namespace

std::string pieces_section(const fs::path& out) {
  std::map<std::string, std::pair<int, double>> by_kind;  // kind -> (pieces, seconds)
  std::vector<std::pair<std::time_t, std::time_t>> runs;  // (began, finished)
  for (const json& j : step_markers(out)) {
    const double sec = j.value("seconds", 0.0);
    auto& k = by_kind[j.value("kind", std::string("?"))];
    ++k.first;
    k.second += sec;
    const auto done = parse_utc_clock(j.value("finished_at", std::string()));
    if (!done) continue;
    runs.push_back({*done - static_cast<std::time_t>(std::llround(sec)), *done});
  }
  if (by_kind.empty()) return "";
  std::string md =
      "\n### Pieces\n\nEach piece's wall time as `reproduce` timed it (`OUT/steps/*.json`; time "
      "spent sharing the cores counts), one piece at a time:\n\n| kind | pieces | minutes |\n| "
      "--- | ---: | ---: |\n";
  int pieces = 0;
  double total = 0;
  for (const auto& [kind, k] : by_kind) {
    md += fmt::format("| {} | {} | {:.1f} |\n", kind, k.first, k.second / 60);
    pieces += k.first;
    total += k.second;
  }
  md += fmt::format("| all | {} | {:.1f} |\n", pieces, total / 60);
  return md + wall_clock_text(std::move(runs));
}

std::string write_seed_report(const ExperimentSpec& e, const fs::path& out) {
  json numbers = json::object();
  const std::string md = seed_report_text(e, out, out.string(), numbers);
  io::write_file_atomic(out / "results.md", md);
  io::write_file_atomic(out / "results.json", numbers.dump(2) + "\n");
  return (out / "results.md").string();
}

std::string readme_section(const ExperimentSpec& e, const fs::path& out) {
  json numbers = json::object();
  std::istringstream in(seed_report_text(e, out, "OUT", numbers));
  std::string section, line;
  bool title = true;
  while (std::getline(in, line)) {
    if (title && line.rfind("# ", 0) == 0) continue;  // the README has its own title
    if (title && line.empty()) continue;
    title = false;
    if (line.rfind("#", 0) == 0) line = "#" + line;
    section += line + "\n";
  }
  return section;
}

void replace_readme_section(const fs::path& readme, const std::string& section,
                            const std::string& begin_marker, const std::string& end_marker) {
  const std::string text = io::read_file(readme);
  const std::string begin = begin_marker + "\n", end = end_marker;
  const size_t b = text.find(begin), e = text.find(end);
  HC_CHECK(b != std::string::npos && e != std::string::npos && b < e,
           "{}: expected the line\n  {}\nand after it the line\n  {}\naround the generated "
           "section",
           readme.string(), begin_marker, end_marker);
  HC_CHECK(
      text.find(begin, b + 1) == std::string::npos && text.find(end, e + 1) == std::string::npos,
      "{}: the generated section's markers appear more than once", readme.string());
  const size_t from = b + begin.size();
  io::write_file_atomic(readme, text.substr(0, from) + "\n" + section + "\n" + text.substr(e));
}

}  // namespace headcount::sweep
