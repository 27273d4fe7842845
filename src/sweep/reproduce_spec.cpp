// The experiment file of `headcount reproduce` and the plan made from it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/yaml_check.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"
#include "headcount/sweep/reproduce.h"
#include "sweep/sweep_yaml.h"

namespace headcount::sweep {
namespace {

using detail::assignments;
using detail::check_keys;
using detail::string_list;
using detail::where;
using detail::yaml_text;

const std::set<std::string> kTopLevel = {"baseline", "prune", "series", "scratch", "targets",
                                         "evaluate", "seeds", "goals",  "profiles"};

YAML::Node read_experiment_yaml(const fs::path& file) {
  return detail::read_yaml_file(file, "experiment file", "a map with baseline, prune and series");
}

// --profile NAME: the profile's top-level keys replace the file's.
YAML::Node apply_profile(const YAML::Node& root, const fs::path& file, const std::string& profile) {
  if (profile.empty()) return root;
  const YAML::Node profiles = root["profiles"];
  std::vector<std::string> known;
  if (profiles && profiles.IsMap())
    for (const auto& kv : profiles) known.push_back(kv.first.Scalar());
  HC_CHECK(profiles && profiles.IsMap() && profiles[profile],
           "--profile {}: {} has no such profile (its profiles: {})", profile, file.string(),
           known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
  const YAML::Node p = profiles[profile];
  HC_CHECK(p.IsMap(), "{}: profiles: {}: expected a map of top-level keys", where(file, p),
           profile);
  YAML::Node out = YAML::Clone(root);
  for (const auto& kv : p) {
    const std::string key = kv.first.Scalar();
    HC_CHECK(kTopLevel.count(key) && key != "profiles",
             "{}: profiles: {}: unknown key '{}' (a profile replaces top-level keys: baseline, "
             "prune, series, scratch, targets, evaluate, seeds, goals)",
             where(file, kv.first), profile, key);
    out[key] = kv.second;
  }
  return out;
}

template <typename T>
T scalar_as(const YAML::Node& node, const fs::path& file, const std::string& key,
            const char* expected) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    HC_FAIL("{}: {}: '{}' is not {}", where(file, node), key, yaml_text(node), expected);
  }
}

std::vector<int64_t> legs_of(const YAML::Node& node, const fs::path& file, const std::string& key) {
  std::vector<int64_t> legs;
  HC_CHECK(node.IsSequence() && node.size() > 0,
           "{}: {}: expected a list of step counts, e.g. [3000, 6000] (one training leg each)",
           where(file, node), key);
  for (const auto& e : node) {
    const auto v = scalar_as<int64_t>(e, file, key, "a step count");
    HC_CHECK(v > 0 && (legs.empty() || v > legs.back()),
             "{}: {}: the legs' step counts must be positive and increasing", where(file, e), key);
    legs.push_back(v);
  }
  return legs;
}

void parse_baseline(const YAML::Node& n, const fs::path& file, ExperimentSpec& e) {
  HC_CHECK(n, "{}: 'baseline' is missing (from: a checkpoint folder, or configs and legs)",
           file.string());
  check_keys(n, file, "baseline", {"from", "configs", "set", "legs"});
  if (n["from"]) {
    HC_CHECK(!n["configs"] && !n["legs"],
             "{}: baseline: give either 'from' (committed weights) or 'configs' and 'legs' "
             "(train it), not both",
             where(file, n));
    e.baseline_from = n["from"].Scalar();
    std::error_code ec;
    HC_CHECK(fs::exists(run::CheckpointFolder{e.baseline_from}.architecture(), ec),
             "{}: baseline: from: {} is not a checkpoint folder (no architecture.json)",
             where(file, n["from"]), e.baseline_from.string());
    HC_CHECK(fs::exists(run::CheckpointFolder{e.baseline_from}.weights(), ec),
             "{}: baseline: from: {} has no model.pt (committed weights are packed: run "
             "scripts/setup.sh, or python3 scripts/weights.py unpack {})",
             where(file, n["from"]), e.baseline_from.string(), e.baseline_from.string());
    return;
  }
  HC_CHECK(n["configs"] && n["legs"],
           "{}: baseline: give 'from' (committed weights) or 'configs' and 'legs' (train it)",
           where(file, n));
  e.baseline_configs = string_list(n["configs"], file, "baseline: configs");
  e.baseline_set = assignments(n["set"], file, "baseline: set");
  e.baseline_legs = legs_of(n["legs"], file, "baseline: legs");
}

void parse_series(const YAML::Node& n, const fs::path& file, ExperimentSpec& e) {
  HC_CHECK(n && n.IsSequence() && n.size() > 0,
           "{}: 'series' is missing or empty: expected a list of {{name, lambdas, set}}",
           file.string());
  std::set<std::string> names;
  for (const auto& s : n) {
    check_keys(s, file, "series", {"name", "lambdas", "set"});
    ExperimentSeries out;
    HC_CHECK(s["name"] && s["name"].IsScalar() && !s["name"].Scalar().empty(),
             "{}: series: every series needs a name", where(file, s));
    out.name = s["name"].Scalar();
    HC_CHECK(names.insert(out.name).second, "{}: series: '{}' twice", where(file, s), out.name);
    HC_CHECK(s["lambdas"] && s["lambdas"].IsSequence(),
             "{}: series {}: 'lambdas' must be a list of numbers (its control, lambda 0, is "
             "added)",
             where(file, s), out.name);
    for (const auto& l : s["lambdas"]) {
      const double v = scalar_as<double>(l, file, "lambdas", "a number");
      HC_CHECK(std::isfinite(v) && v > 0,
               "{}: series {}: lambda {} must be positive (the control, lambda 0, is added)",
               where(file, l), out.name, l.Scalar());
      out.lambdas.push_back(l.Scalar());
    }
    out.set = assignments(s["set"], file, "series: set");
    e.series.push_back(out);
  }
}

void parse_scratch(const YAML::Node& n, const fs::path& file, ExperimentSpec& e) {
  if (!n || n.IsNull()) return;
  check_keys(n, file, "scratch", {"configs", "set", "legs", "runs"});
  HC_CHECK(n["configs"] && n["legs"] && n["runs"],
           "{}: scratch: needs configs, legs and runs (the pruned runs to retrain)",
           where(file, n));
  e.scratch_configs = string_list(n["configs"], file, "scratch: configs");
  e.scratch_set = assignments(n["set"], file, "scratch: set");
  e.scratch_legs = legs_of(n["legs"], file, "scratch: legs");
  e.scratch_runs = string_list(n["runs"], file, "scratch: runs");
}

void parse_targets(const YAML::Node& n, const fs::path& file, ExperimentSpec& e) {
  if (!n || n.IsNull()) return;
  check_keys(n, file, "targets", {"set", "runs", "compare_sentences"});
  e.target_set = assignments(n["set"], file, "targets: set");
  if (n["compare_sentences"])
    e.compare_sentences =
        scalar_as<int>(n["compare_sentences"], file, "compare_sentences", "a sentence count");
  HC_CHECK(e.compare_sentences >= 0, "{}: targets: compare_sentences must be 0 (all) or more",
           where(file, n));
  HC_CHECK(n["runs"] && n["runs"].IsSequence(),
           "{}: targets: 'runs' must be a list of {{heads: N, set: {{...}}}}", where(file, n));
  for (const auto& r : n["runs"]) {
    check_keys(r, file, "targets: runs", {"heads", "set", "control"});
    ExperimentTarget t;
    HC_CHECK(r["heads"], "{}: targets: every run needs 'heads'", where(file, r));
    t.heads = scalar_as<int64_t>(r["heads"], file, "heads", "a head count");
    HC_CHECK(t.heads > 0, "{}: targets: heads must be positive", where(file, r["heads"]));
    t.set = assignments(r["set"], file, "targets: runs: set");
    if (r["control"]) t.control = r["control"].Scalar();
    e.targets.push_back(t);
  }
}

void parse_goals(const YAML::Node& n, const fs::path& file, ExperimentSpec& e) {
  if (!n || n.IsNull()) return;
  HC_CHECK(n.IsSequence(), "{}: goals: expected a list", where(file, n));
  for (const auto& g : n) {
    check_keys(g, file, "goals", {"text", "kind", "heads_of", "max", "fraction", "within"});
    ExperimentGoal out;
    out.text = g["text"] ? g["text"].Scalar() : "";
    out.kind = g["kind"] ? g["kind"].Scalar() : "";
    HC_CHECK(
        out.kind == "control_gain" || out.kind == "removed_within" || out.kind == "scratch_within",
        "{}: goals: kind '{}': expected control_gain, removed_within or scratch_within",
        where(file, g), out.kind);
    if (g["heads_of"]) out.heads_of = g["heads_of"].Scalar();
    HC_CHECK(out.heads_of == "all" || out.heads_of == "enc_self" || out.heads_of == "dec_self" ||
                 out.heads_of == "enc_dec",
             "{}: goals: heads_of '{}': expected all, enc_self, dec_self or enc_dec",
             where(file, g), out.heads_of);
    if (g["max"]) out.max = scalar_as<double>(g["max"], file, "max", "a number");
    if (g["fraction"])
      out.fraction = scalar_as<double>(g["fraction"], file, "fraction", "a number");
    if (g["within"]) out.within = scalar_as<double>(g["within"], file, "within", "a number");
    e.goals.push_back(out);
  }
}

void parse_evaluate(const YAML::Node& n, const fs::path& file, ExperimentSpec& e) {
  if (!n || n.IsNull()) return;
  check_keys(n, file, "evaluate", {"splits", "beam"});
  if (n["splits"]) {
    e.splits = string_list(n["splits"], file, "evaluate: splits");
    for (const auto& s : e.splits)
      HC_CHECK(s == "dev" || s == "test", "{}: evaluate: splits: '{}': expected dev or test",
               where(file, n["splits"]), s);
    HC_CHECK(!e.splits.empty(), "{}: evaluate: splits: give dev, test or both", where(file, n));
  }
  if (n["beam"]) e.beam = scalar_as<int>(n["beam"], file, "beam", "a beam size");
  HC_CHECK(e.beam >= 1 && e.beam <= 64, "{}: evaluate: beam must be 1 to 64", where(file, n));
}

// Every run name a scratch entry or a target's control names.
void check_names(const ExperimentSpec& e, const SweepSpec& seed1, const YAML::Node& root) {
  std::set<std::string> pruned, controls;
  for (const auto& p : seed1.points) (p.is_control ? controls : pruned).insert(p.name);
  for (const auto& r : e.scratch_runs)
    HC_CHECK(pruned.count(r),
             "{}: scratch: runs: '{}' is not a pruning run of this experiment (its runs: {})",
             where(e.file, root["scratch"]), r, fmt::join(pruned, ", "));
  for (const auto& p : seed1.points)
    HC_CHECK(p.control.empty() || controls.count(p.control),
             "{}: targets: run {}: control '{}' is not a control of this experiment (its "
             "controls: {})",
             where(e.file, root["targets"]), p.name, p.control, fmt::join(controls, ", "));
}

}  // namespace

ExperimentSpec load_experiment(const fs::path& file, const std::string& profile) {
  const YAML::Node root = apply_profile(read_experiment_yaml(file), file, profile);
  for (const auto& kv : root)
    HC_CHECK(kTopLevel.count(kv.first.Scalar()), "{}: unknown key '{}' (expected one of: {})",
             where(file, kv.first), kv.first.Scalar(), fmt::join(kTopLevel, ", "));
  ExperimentSpec e;
  e.file = file;
  e.profile = profile;
  parse_baseline(root["baseline"], file, e);
  const YAML::Node prune = root["prune"];
  HC_CHECK(prune, "{}: 'prune' is missing (configs and set of every pruning run)", file.string());
  check_keys(prune, file, "prune", {"configs", "set"});
  HC_CHECK(prune["configs"], "{}: prune: 'configs' is missing", where(file, prune));
  e.prune_configs = string_list(prune["configs"], file, "prune: configs");
  e.prune_set = assignments(prune["set"], file, "prune: set");
  parse_series(root["series"], file, e);
  parse_scratch(root["scratch"], file, e);
  parse_targets(root["targets"], file, e);
  parse_evaluate(root["evaluate"], file, e);
  parse_goals(root["goals"], file, e);
  if (root["seeds"]) e.seeds = scalar_as<int>(root["seeds"], file, "seeds", "a count");
  HC_CHECK(e.seeds >= 1 && e.seeds <= 1000, "{}: seeds must be 1 to 1000", where(file, root));
  for (const auto* configs : {&e.baseline_configs, &e.prune_configs, &e.scratch_configs})
    for (const auto& c : *configs) {
      std::error_code ec;
      HC_CHECK(fs::exists(c, ec),
               "{}: config file {} not found (paths are relative to the "
               "current directory)",
               file.string(), c);
    }
  // Resolve every run's config once: a bad key or value is an error naming it, before any work.
  const SweepSpec s = seed_sweep(e, "OUT", 1);
  for (const auto& p : s.points) {
    try {
      (void)resolve_point(s, p);
    } catch (const std::exception& ex) {
      HC_FAIL("{}: run {}: {}", file.string(), p.name, ex.what());
    }
  }
  check_names(e, s, root);
  return e;
}

namespace {

std::string series_run_name(const ExperimentSeries& s, const std::string& lambda) {
  double v = std::stod(lambda);
  return fmt::format("{}-l{}", s.name, v);
}

}  // namespace

SweepSpec seed_sweep(const ExperimentSpec& e, const fs::path& out, int seed) {
  SweepSpec s;
  s.file = e.file;
  s.command = "prune";
  s.configs = e.prune_configs;
  s.set = e.prune_set;
  const fs::path baseline = run::RunFolder{out / "baseline"}.best();
  s.set.emplace_back("prune.init_from", baseline.string());
  s.set.emplace_back("seed", std::to_string(seed));
  s.baseline = (out / "baseline").string();
  s.retrain = !e.scratch_runs.empty();
  s.retrain_configs = e.scratch_configs;
  s.retrain_set = e.scratch_set;
  auto add_axis = [&](const std::string& k) {
    if (std::find(s.axes.begin(), s.axes.end(), k) == s.axes.end()) s.axes.push_back(k);
  };
  for (const auto& series : e.series) {
    const std::string control = series.name + "-l0";
    std::vector<std::string> lambdas = {"0"};
    lambdas.insert(lambdas.end(), series.lambdas.begin(), series.lambdas.end());
    for (const std::string& lambda : lambdas) {
      SweepPoint p;
      p.name = series_run_name(series, lambda);
      p.values = series.set;
      p.values.emplace_back("prune.lambda", lambda);
      p.is_control = lambda == "0";
      if (!p.is_control) p.control = control;
      for (const auto& [k, v] : p.values) add_axis(k);
      s.points.push_back(p);
    }
  }
  for (const auto& t : e.targets) {
    SweepPoint p;
    p.name = fmt::format("target-{}", t.heads);
    p.values = e.target_set;
    for (const auto& kv : t.set) p.values.push_back(kv);
    p.values.emplace_back("prune.target_heads", std::to_string(t.heads));
    p.control = t.control.empty() ? e.series.front().name + "-l0" : t.control;
    for (const auto& [k, v] : p.values) add_axis(k);
    s.points.push_back(p);
  }
  return s;
}

}  // namespace headcount::sweep
