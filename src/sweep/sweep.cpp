#include "headcount/sweep/sweep.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/yaml_check.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/process.h"
#include "headcount/common/run_guard.h"
#include "headcount/common/runtime.h"
#include "headcount/common/signals.h"
#include "headcount/common/text.h"
#include "headcount/prune/outcome.h"
#include "headcount/run/run_folder.h"
#include "headcount/train/trainer.h"
#include "sweep/sweep_yaml.h"

namespace headcount::sweep {
namespace detail {

std::string where(const fs::path& file, const YAML::Node& node) {
  return fmt::format("{}:{}", file.string(), node.Mark().line + 1);
}

// A value as YAML text that `--set key=TEXT` parses back to the same value.
std::string yaml_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// A value as it appears in a run name: sequences joined with '+', unsafe characters replaced.
std::string name_text(const std::string& yaml_value) {
  std::string v = yaml_value;
  if (!v.empty() && v.front() == '[' && v.back() == ']') {
    const YAML::Node node = YAML::Load(v);
    std::vector<std::string> parts;
    for (const auto& e : node) parts.push_back(e.IsScalar() ? e.Scalar() : yaml_text(e));
    v = parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, "+"));
  }
  std::string out;
  for (char c : v) {
    const bool safe =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' || c == '-';
    out += safe ? c : '-';
  }
  return out.empty() ? "empty" : out;
}

std::vector<std::string> string_list(const YAML::Node& node, const fs::path& file,
                                     const std::string& key) {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    out.push_back(node.Scalar());
  } else if (node.IsSequence()) {
    for (const auto& e : node) {
      HC_CHECK(e.IsScalar(), "{}: {}: expected a list of file names", where(file, e), key);
      out.push_back(e.Scalar());
    }
  } else {
    HC_FAIL("{}: {}: expected a file name or a list of them", where(file, node), key);
  }
  return out;
}

Assignments assignments(const YAML::Node& node, const fs::path& file, const std::string& key) {
  Assignments out;
  if (!node || node.IsNull()) return out;
  HC_CHECK(node.IsMap(), "{}: {}: expected a map of config keys to values, e.g. {{train.lr: 1e-4}}",
           where(file, node), key);
  for (const auto& kv : node) out.emplace_back(kv.first.Scalar(), yaml_text(kv.second));
  return out;
}

void add_threads(std::vector<std::string>& args, const Assignments& a, const Assignments& b,
                 int threads_blas) {
  if (threads_blas <= 0) return;
  for (const auto* list : {&a, &b})
    for (const auto& [k, v] : *list)
      if (k.rfind("threads.", 0) == 0) return;  // the sweep decides the threads itself
  // Auto LibTorch threads: one beside OpenBLAS's in fp32, the process's share in bf16.
  args.insert(args.end(), {"--set", "threads.intra_op=-1", "--set",
                           fmt::format("threads.blas={}", threads_blas)});
}

void check_keys(const YAML::Node& node, const fs::path& file, const std::string& what,
                const std::set<std::string>& allowed) {
  HC_CHECK(node.IsMap(), "{}: {}: expected a map", where(file, node), what);
  for (const auto& kv : node)
    HC_CHECK(allowed.count(kv.first.Scalar()), "{}: {}: unknown key '{}' (expected one of: {})",
             where(file, kv.first), what, kv.first.Scalar(), fmt::join(allowed, ", "));
}

// A sweep or experiment file's YAML, checked: it exists, parses, has no key twice and is a map.
YAML::Node read_yaml_file(const fs::path& file, const std::string& what,
                          const std::string& expected) {
  std::error_code ec;
  HC_CHECK(fs::exists(file, ec), "{} {} not found", what, file.string());
  HC_CHECK(!fs::is_directory(file, ec), "{}: is a folder, expected a {} (YAML)", file.string(),
           what);
  YAML::Node root;
  try {
    const std::string article =
        std::string("aeiou").find(what.front()) != std::string::npos ? "an " : "a ";
    root = YAML::Load(io::read_file_bounded(file, io::kMaxConfigBytes, article + what + " (YAML)"));
  } catch (const YAML::ParserException& e) {
    HC_FAIL("{}:{}: not valid YAML: {}", file.string(), e.mark.line + 1, e.msg);
  }
  check_unique_keys(root, file.string());
  HC_CHECK(root.IsMap(), "{}: expected {}", file.string(), expected);
  return root;
}

}  // namespace detail

namespace {

using detail::add_threads;
using detail::assignments;
using detail::name_text;
using detail::string_list;
using detail::where;
using detail::yaml_text;

void check_configs_exist(const std::vector<std::string>& configs, const fs::path& file,
                         const YAML::Node& node, const std::string& key) {
  HC_CHECK(!configs.empty(), "{}: {}: give at least one config file", where(file, node), key);
  for (const auto& c : configs) {
    std::error_code ec;
    HC_CHECK(fs::exists(c, ec),
             "{}: {}: config file {} not found (paths are relative to the "
             "current directory)",
             where(file, node), key, c);
  }
}

// Key/value of config keys inside a point, checked against the schema by resolving the config.
const std::set<std::string> kTopLevel = {"command",  "configs",  "set",     "grid", "runs",
                                         "controls", "baseline", "retrain", "slurm"};

std::string exit_file(const fs::path& dir) {
  return run::RunFolder{dir}.sweep_exit().string();
}

std::vector<std::string> tail_lines(const fs::path& file, size_t n) {
  // Only the file's last 64 KiB: a run's log can be long, and a progress line redrawn with '\r'
  // for hours is one line of megabytes.
  constexpr std::streamoff kTail = 64 * 1024;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return {};
  std::ifstream in(file, std::ios::binary);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size <= 0) return {};
  const std::streamoff from = size > kTail ? size - kTail : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  std::deque<std::string> lines;
  size_t start = 0;
  if (from > 0) start = text.find('\n') == std::string::npos ? 0 : text.find('\n') + 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    // Progress lines redraw with '\r': keep the last state of each line.
    while (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t cr = line.rfind('\r');
    if (cr != std::string::npos) line = line.substr(cr + 1);
    lines.push_back(std::move(line));
    if (lines.size() > n) lines.pop_front();
    start = end + 1;
  }
  return {lines.begin(), lines.end()};
}

// A point's value of `key`, or nullopt when it does not set it.
std::optional<std::string> value_of(const SweepPoint& p, const std::string& key) {
  for (const auto& [k, v] : p.values)
    if (k == key) return v;
  return std::nullopt;
}

// Each point's control: the named one, or the one control that agrees with it on every axis but
// the pruning strength. A point's `control: NAME` is already in its `control`; `control_nodes[i]`
// is where it was written (for errors), `nodes[i]` where the point was.
void resolve_controls(SweepSpec& spec, const std::vector<YAML::Node>& nodes,
                      const std::vector<YAML::Node>& control_nodes) {
  const fs::path& file = spec.file;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < spec.points.size(); ++i) index[spec.points[i].name] = i;
  std::vector<std::string> controls;
  for (const auto& p : spec.points)
    if (p.is_control) controls.push_back(p.name);
  for (size_t i = 0; i < spec.points.size(); ++i) {
    auto& p = spec.points[i];
    const std::string& named = p.control;
    const YAML::Node& node = control_nodes[i];
    if (!named.empty()) {
      HC_CHECK(!p.is_control,
               "{}: run '{}' is a control and names '{}' as its control: a control has no "
               "control of its own",
               where(file, node), p.name, named);
      const auto it = index.find(named);
      HC_CHECK(
          it != index.end(),
          "{}: run '{}': control: the sweep has no run named '{}' (its controls: {})",
          where(file, node), p.name, named,
          controls.empty() ? std::string("none") : fmt::format("{}", fmt::join(controls, ", ")));
      HC_CHECK(spec.points[it->second].is_control,
               "{}: run '{}': control: '{}' is not a control (list it in 'controls' or give it "
               "'control: true')",
               where(file, node), p.name, named);
      continue;
    }
    if (p.is_control) continue;
    std::vector<std::string> matches;
    for (const auto& c : controls) {
      const auto& q = spec.points[index.at(c)];
      bool same = true;
      for (const auto& axis : spec.axes) {
        if (std::find(kStrengthKeys.begin(), kStrengthKeys.end(), axis) != kStrengthKeys.end())
          continue;
        if (value_of(p, axis) != value_of(q, axis)) {
          same = false;
          break;
        }
      }
      if (same) matches.push_back(c);
    }
    HC_CHECK(matches.size() <= 1,
             "{}: run '{}' matches several controls ({}): they agree with it on every axis but "
             "the pruning strength; name its control with 'control: NAME' in its entry under "
             "'runs'",
             where(file, nodes[i]), p.name, fmt::join(matches, ", "));
    if (!matches.empty()) p.control = matches[0];
  }
}

}  // namespace

const std::vector<std::string> kStrengthKeys = {"prune.lambda",
                                                "prune.lambda_schedule",
                                                "prune.lambda_warmup_steps",
                                                "prune.lambda_steps",
                                                "prune.lambda_values",
                                                "prune.target_heads",
                                                "prune.target_heads_per_type",
                                                "prune.target_warmup_steps",
                                                "prune.lagrangian_lr"};

std::string point_name(const Assignments& values, const std::vector<std::string>& axes) {
  std::map<std::string, int> short_count;
  auto short_key = [](const std::string& key) {
    const size_t dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
  };
  for (const auto& a : axes) ++short_count[short_key(a)];
  std::vector<std::string> parts;
  for (const auto& axis : axes) {
    for (const auto& [k, v] : values) {
      if (k != axis) continue;
      const std::string label = short_count[short_key(k)] > 1 ? k : short_key(k);
      parts.push_back(label + "-" + name_text(v));
    }
  }
  return parts.empty() ? "default" : fmt::format("{}", fmt::join(parts, "_"));
}

Config resolve_point(const SweepSpec& spec, const SweepPoint& point) {
  ConfigLoader loader;
  for (const auto& c : spec.configs) loader.apply_file(c);
  for (const auto& [k, v] : spec.set) loader.apply_set(k + "=" + v);
  for (const auto& [k, v] : point.values) loader.apply_set(k + "=" + v);
  return loader.finish();
}

namespace {

YAML::Node read_sweep_yaml(const fs::path& file) {
  return detail::read_yaml_file(file, "sweep file", "a map with command, configs and grid or runs");
}

// The top-level keys checked, then command, configs, set and baseline.
void read_sweep_head(YAML::Node& root, SweepSpec& spec) {
  const fs::path& file = spec.file;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (!kTopLevel.count(key)) {
      HC_FAIL("{}: unknown sweep key '{}'; expected one of: {}", where(file, kv.first), key,
              fmt::join(kTopLevel, ", "));
    }
  }
  // Required: a default would run prune on a file meant for training, or the reverse.
  HC_CHECK(root["command"], "{}: 'command' is required: train or prune", file.string());
  spec.command = root["command"].Scalar();
  HC_CHECK(spec.command == "train" || spec.command == "prune",
           "{}: command: expected train or prune, got '{}'", where(file, root["command"]),
           spec.command);
  HC_CHECK(root["configs"], "{}: 'configs' is required: the base config file(s) of every run",
           file.string());
  spec.configs = string_list(root["configs"], file, "configs");
  check_configs_exist(spec.configs, file, root["configs"], "configs");
  spec.set = assignments(root["set"], file, "set");
  if (root["baseline"]) spec.baseline = root["baseline"].Scalar();
}

// The points as written, before naming: each with the node its errors point at and, per point,
// where its `control: NAME` is.
struct WrittenPoints {
  std::vector<std::pair<SweepPoint, YAML::Node>> points;
  std::vector<YAML::Node> control_nodes;
};

// The grid's combinations, the last axis varying fastest.
// More runs than any machine finishes (a run takes minutes at the least).
constexpr size_t kMaxSweepRuns = 10000;

void add_grid_points(const YAML::Node& grid, SweepSpec& spec, WrittenPoints& out) {
  const fs::path& file = spec.file;
  HC_CHECK(grid.IsMap(), "{}: grid: expected a map of config keys to lists of values",
           where(file, grid));
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  for (const auto& kv : grid) {
    const std::string key = kv.first.Scalar();
    HC_CHECK(kv.second.IsSequence() && kv.second.size() > 0,
             "{}: grid: {}: expected a non-empty list of values, e.g. [0.01, 0.05]",
             where(file, kv.second), key);
    std::vector<std::string> values;
    for (const auto& v : kv.second) values.push_back(yaml_text(v));
    axes.emplace_back(key, values);
    spec.axes.push_back(key);
  }
  // Counted before anything is expanded: a few short lists multiply into millions of runs.
  size_t runs = 1;
  for (const auto& [key, values] : axes) {
    runs *= values.size();
    HC_CHECK(runs <= kMaxSweepRuns,
             "{}: grid: more than {} runs (the product of the lists' lengths, up to {}); split "
             "the sweep, or list its runs under 'runs'",
             where(file, grid), kMaxSweepRuns, key);
  }
  std::vector<size_t> index(axes.size(), 0);
  while (true) {
    SweepPoint p;
    for (size_t a = 0; a < axes.size(); ++a)
      p.values.emplace_back(axes[a].first, axes[a].second[index[a]]);
    out.points.emplace_back(p, grid);
    out.control_nodes.emplace_back();
    size_t a = axes.size();
    while (a > 0 && ++index[a - 1] == axes[a - 1].second.size()) index[--a] = 0;
    if (a == 0) break;
  }
}

// A run entry's `control:`: true (the run is a control) or the name of its control.
void read_run_control(const YAML::Node& key_node, const YAML::Node& value, const SweepSpec& spec,
                      SweepPoint& p, YAML::Node& control_node) {
  const fs::path& file = spec.file;
  HC_CHECK(spec.command == "prune", "{}: control: only a prune sweep has zero-pruning controls",
           where(file, key_node));
  HC_CHECK(value.IsScalar() && !value.Scalar().empty(),
           "{}: control: expected true (this run is a control) or the name of this run's "
           "control",
           where(file, value));
  bool is_control = false;
  if (YAML::convert<bool>::decode(value, is_control)) {
    p.is_control = is_control;
  } else {
    p.control = value.Scalar();
    control_node = value;
  }
}

// The explicit runs, in the order listed; a key not yet an axis becomes one.
void add_run_points(const YAML::Node& runs, SweepSpec& spec, WrittenPoints& out) {
  const fs::path& file = spec.file;
  HC_CHECK(runs.IsSequence(), "{}: runs: expected a list of maps of config keys to values",
           where(file, runs));
  for (const auto& r : runs) {
    HC_CHECK(r.IsMap(), "{}: runs: each run is a map of config keys to values", where(file, r));
    SweepPoint p;
    YAML::Node control_node;  // its `control: NAME`
    for (const auto& kv : r) {
      const std::string key = kv.first.Scalar();
      if (key == "name") {
        p.name = kv.second.Scalar();
        continue;
      }
      if (key == "control") {
        read_run_control(kv.first, kv.second, spec, p, control_node);
        continue;
      }
      p.values.emplace_back(key, yaml_text(kv.second));
      if (std::find(spec.axes.begin(), spec.axes.end(), key) == spec.axes.end())
        spec.axes.push_back(key);
    }
    out.points.emplace_back(p, r);
    out.control_nodes.push_back(control_node);
  }
}

// The points named (plain, unique folder names) and resolved into the spec; per point, the node
// its errors point at and its config.
void name_points(WrittenPoints& written, SweepSpec& spec, std::vector<YAML::Node>& nodes,
                 std::vector<Config>& resolved) {
  const fs::path& file = spec.file;
  std::map<std::string, std::string> seen;  // name -> where
  for (auto& [p, node] : written.points) {
    if (p.name.empty()) p.name = point_name(p.values, spec.axes);
    HC_CHECK(p.name.find('/') == std::string::npos && p.name != "." && p.name != "..",
             "{}: run name '{}' must be a plain folder name", where(file, node), p.name);
    const auto it = seen.find(p.name);
    HC_CHECK(it == seen.end(), "{}: two runs are named '{}' (the other at {}): give one a 'name'",
             where(file, node), p.name, it == seen.end() ? "" : it->second);
    seen[p.name] = where(file, node);
    Config config;
    try {
      config = resolve_point(spec, p);
    } catch (const Error& e) {
      HC_FAIL("{}: run '{}': {}", where(file, node), p.name, e.what());
    }
    if (spec.command == "prune") {
      HC_CHECK(!config.prune.init_from.empty(),
               "{}: run '{}': prune.init_from is empty: a prune sweep needs the converged "
               "checkpoint (in a config or under 'set')",
               where(file, node), p.name);
    }
    spec.points.push_back(p);
    nodes.push_back(node);
    resolved.push_back(config);
  }
}

// `controls: [NAME, ...]`: marks those runs as zero-pruning controls.
void mark_controls(const YAML::Node& c, SweepSpec& spec) {
  const fs::path& file = spec.file;
  HC_CHECK(spec.command == "prune", "{}: controls: only a prune sweep has zero-pruning controls",
           where(file, c));
  HC_CHECK(c.IsSequence() || c.IsScalar(),
           "{}: controls: expected a list of run names, e.g. [lambda-0]", where(file, c));
  std::vector<YAML::Node> names;
  if (c.IsScalar()) names.push_back(c);
  for (const auto& e : c) names.push_back(e);
  for (const auto& n : names) {
    HC_CHECK(n.IsScalar(), "{}: controls: expected a list of run names", where(file, n));
    auto it = std::find_if(spec.points.begin(), spec.points.end(),
                           [&](const SweepPoint& p) { return p.name == n.Scalar(); });
    if (it == spec.points.end()) {
      std::vector<std::string> all;
      for (const auto& p : spec.points) all.push_back(p.name);
      HC_FAIL("{}: controls: the sweep has no run named '{}' (its runs: {})", where(file, n),
              n.Scalar(), fmt::join(all, ", "));
    }
    it->is_control = true;
  }
}

void warn_pruning_controls(const SweepSpec& spec, const std::vector<YAML::Node>& nodes,
                           const std::vector<Config>& resolved) {
  for (size_t i = 0; i < spec.points.size(); ++i) {
    const auto& p = spec.points[i];
    if (!p.is_control) continue;
    const auto& q = resolved[i].prune;
    if (q.lambda != 0 || q.target_heads != 0 || !q.target_heads_per_type.empty()) {
      log::warn(
          "{}: run '{}' is a control but prunes (prune.lambda {}, prune.target_heads {}, "
          "prune.target_heads_per_type [{}]): a zero-pruning control normally has prune.lambda 0",
          where(spec.file, nodes[i]), p.name, q.lambda, q.target_heads,
          fmt::join(q.target_heads_per_type, ", "));
    }
  }
}

// `retrain:`, checked by loading its config as a retraining would.
void read_retrain(const YAML::Node& r, SweepSpec& spec) {
  const fs::path& file = spec.file;
  HC_CHECK(spec.command == "prune",
           "{}: retrain: only a prune sweep has pruned architectures "
           "to retrain",
           where(file, r));
  HC_CHECK(r.IsMap(), "{}: retrain: expected a map with configs (and set)", where(file, r));
  for (const auto& kv : r) {
    const std::string key = kv.first.Scalar();
    HC_CHECK(key == "configs" || key == "set", "{}: retrain: unknown key '{}' (configs, set)",
             where(file, kv.first), key);
  }
  HC_CHECK(r["configs"], "{}: retrain: 'configs' is required (the baseline's training config)",
           where(file, r));
  spec.retrain = true;
  spec.retrain_configs = string_list(r["configs"], file, "retrain.configs");
  check_configs_exist(spec.retrain_configs, file, r["configs"], "retrain.configs");
  spec.retrain_set = assignments(r["set"], file, "retrain.set");
  ConfigLoader loader;
  try {
    for (const auto& c : spec.retrain_configs) loader.apply_file(c);
    for (const auto& [k, v] : spec.retrain_set) loader.apply_set(k + "=" + v);
    loader.finish();
  } catch (const Error& e) {
    HC_FAIL("{}: retrain: {}", where(file, r), e.what());
  }
}

void read_slurm(const YAML::Node& s, SweepSpec& spec) {
  const fs::path& file = spec.file;
  HC_CHECK(s.IsMap(),
           "{}: slurm: expected a map (partition, account, time, mem, "
           "cpus_per_task, ntasks, extra)",
           where(file, s));
  for (const auto& kv : s) {
    const std::string key = kv.first.Scalar();
    const auto& v = kv.second;
    try {
      if (key == "partition")
        spec.slurm.partition = v.as<std::string>();
      else if (key == "account")
        spec.slurm.account = v.as<std::string>();
      else if (key == "time")
        spec.slurm.time = v.as<std::string>();
      else if (key == "mem")
        spec.slurm.mem = v.as<std::string>();
      else if (key == "cpus_per_task")
        spec.slurm.cpus_per_task = v.as<int>();
      else if (key == "ntasks")
        spec.slurm.ntasks = v.as<int>();
      else if (key == "extra")
        spec.slurm.extra = string_list(v, file, "slurm.extra");
      else
        HC_FAIL(
            "{}: slurm: unknown key '{}' (partition, account, time, mem, cpus_per_task, "
            "ntasks, extra)",
            where(file, kv.first), key);
    } catch (const YAML::Exception&) {
      HC_FAIL("{}: slurm: {}: cannot read '{}'", where(file, v), key, yaml_text(v));
    }
  }
  HC_CHECK(spec.slurm.cpus_per_task >= 1, "{}: slurm: cpus_per_task must be at least 1",
           where(file, s));
  HC_CHECK(spec.slurm.ntasks >= 1, "{}: slurm: ntasks must be at least 1", where(file, s));
}

}  // namespace

SweepSpec load_sweep(const fs::path& file) {
  YAML::Node root = read_sweep_yaml(file);
  SweepSpec spec;
  spec.file = file;
  read_sweep_head(root, spec);
  // Points: the grid's combinations, then the explicit runs.
  WrittenPoints written;
  if (const auto grid = root["grid"]) add_grid_points(grid, spec, written);
  if (const auto runs = root["runs"]) add_run_points(runs, spec, written);
  HC_CHECK(!written.points.empty(), "{}: no runs: give a 'grid' or a list of 'runs'",
           file.string());
  std::vector<YAML::Node> nodes;
  std::vector<Config> resolved;
  name_points(written, spec, nodes, resolved);
  // Zero-pruning controls: `controls: [NAME, ...]` and `control: true` in runs.
  if (const auto c = root["controls"]) mark_controls(c, spec);
  resolve_controls(spec, nodes, written.control_nodes);
  warn_pruning_controls(spec, nodes, resolved);
  if (const auto r = root["retrain"]) read_retrain(r, spec);
  if (const auto s = root["slurm"]) read_slurm(s, spec);
  return spec;
}

Job point_job(const SweepSpec& spec, size_t point, const fs::path& out, int threads_blas) {
  const auto& p = spec.points.at(point);
  Job j;
  j.point = point;
  j.name = p.name;
  j.dir = out / p.name;
  j.args.push_back(spec.command);
  j.args.insert(j.args.end(), spec.configs.begin(), spec.configs.end());
  for (const auto* list : {&spec.set, &p.values})
    for (const auto& [k, v] : *list) j.args.insert(j.args.end(), {"--set", k + "=" + v});
  add_threads(j.args, spec.set, p.values, threads_blas);
  j.args.insert(j.args.end(), {"--out", j.dir.string()});
  return j;
}

Job retrain_job(const SweepSpec& spec, size_t point, const fs::path& out, int threads_blas) {
  const auto& p = spec.points.at(point);
  Job j;
  j.point = point;
  j.retrain = true;
  j.name = p.name + "/scratch";
  j.dir = out / p.name / "scratch";
  j.args.push_back("train");
  j.args.insert(j.args.end(), spec.retrain_configs.begin(), spec.retrain_configs.end());
  for (const auto& [k, v] : spec.retrain_set) j.args.insert(j.args.end(), {"--set", k + "=" + v});
  add_threads(j.args, spec.retrain_set, {}, threads_blas);
  j.args.insert(j.args.end(),
                {"--architecture-from", run::RunFolder{out / p.name}.pruned().string(), "--out",
                 j.dir.string()});
  return j;
}

const char* state_name(RunState s) {
  switch (s) {
    case RunState::kPending:
      return "pending";
    case RunState::kInterrupted:
      return "interrupted";
    case RunState::kRunning:
      return "running";
    case RunState::kDone:
      return "done";
    case RunState::kFailed:
      return "failed";
  }
  return "?";
}

bool nothing_pruned(const fs::path& prune_run) {
  std::error_code ec;
  if (!fs::exists(run::RunFolder{prune_run}.pruning(), ec)) return false;
  const auto outcome = prune::read_prune_outcome(prune_run);  // errors name the file and key
  return outcome.heads_before == outcome.heads_after;
}

RunState run_state(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(run::RunFolder{dir}.summary(), ec)) return RunState::kDone;
  if (fs::exists(exit_file(dir), ec)) {
    try {
      const auto j = nlohmann::json::parse(io::read_file(exit_file(dir)));
      if (j.value("failed", false)) return RunState::kFailed;
    } catch (const std::exception&) {
      return RunState::kFailed;
    }
  }
  if (fs::exists(run::RunFolder{dir}.last(), ec)) return RunState::kInterrupted;
  return RunState::kPending;
}

std::optional<double> run_bleu(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(run::RunFolder{dir}.pruning(), ec))
    return prune::read_prune_outcome(dir).dev_bleu_end;
  std::optional<double> best;
  for (const auto& j : run::read_jsonl(run::RunFolder{dir}.metrics())) {
    if (!j.contains("dev_bleu")) continue;
    const double b = j["dev_bleu"].get<double>();
    if (!best || b > *best) best = b;
  }
  return best;
}

std::string status_table(const SweepSpec& spec, const fs::path& out) {
  std::string s = fmt::format("{:<40} {:<12} {:>9}  {}\n", "run", "state", "dev BLEU", "values");
  for (const auto& p : spec.points) {
    std::vector<std::string> vals;
    for (const auto& [k, v] : p.values) vals.push_back(k + "=" + v);
    auto row = [&](const std::string& name, const fs::path& dir, const std::string& values) {
      const auto bleu = run_bleu(dir);
      s += fmt::format("{:<40} {:<12} {:>9}  {}\n", name, state_name(run_state(dir)),
                       bleu ? fmt::format("{:.2f}", *bleu) : "-", values);
    };
    if (p.is_control) vals.push_back("(control)");
    if (!p.control.empty()) vals.push_back(fmt::format("(control: {})", p.control));
    row(p.name, out / p.name, fmt::format("{}", fmt::join(vals, " ")));
    if (spec.retrain) row(p.name + "/scratch", out / p.name / "scratch", "(from scratch)");
  }
  return s;
}

namespace {

// False (and says why) for a finished prune run that removed no head.
bool retrain_needed(const Job& job) {
  if (!nothing_pruned(job.dir)) return true;
  log::info("sweep: {} removed no head: its retraining would repeat the baseline, not run",
            job.name);
  return false;
}

}  // namespace

nlohmann::json sweep_manifest(const SweepSpec& spec) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : spec.points) {
    nlohmann::json values = nlohmann::json::object();
    for (const auto& [k, v] : p.values) values[k] = v;
    points.push_back({{"name", p.name},
                      {"values", values},
                      {"is_control", p.is_control},
                      {"control", p.control}});
  }
  nlohmann::json set = nlohmann::json::object();
  for (const auto& [k, v] : spec.set) set[k] = v;
  return {{"sweep_file", fs::absolute(spec.file).string()},
          {"command", spec.command},
          {"configs", spec.configs},
          {"set", set},
          {"axes", spec.axes},
          {"baseline", spec.baseline},
          {"retrain", spec.retrain},
          {"points", points}};
}

namespace {

void write_manifest(const SweepSpec& spec, const fs::path& out) {
  io::write_file_atomic(out / "sweep.json", sweep_manifest(spec).dump(2) + "\n");
}

// The keys of two maps key -> value whose values differ (or that only one has), into `changed`
// (the ones a resume may change into `allowed`).
void compare_settings(const nlohmann::json& a, const nlohmann::json& b, const std::string& where,
                      std::vector<std::string>& changed, std::vector<std::string>& allowed) {
  std::set<std::string> keys;
  for (const auto* m : {&a, &b})
    if (m->is_object())
      for (const auto& [k, v] : m->items()) keys.insert(k);
  for (const auto& k : keys) {
    const auto va = a.is_object() ? a.value(k, nlohmann::json()) : nlohmann::json();
    const auto vb = b.is_object() ? b.value(k, nlohmann::json()) : nlohmann::json();
    if (va == vb) continue;
    (train::resume_may_change(k) ? allowed : changed).push_back(where + k);
  }
}

// A sweep folder's runs were started under its sweep.json: the same sweep again (the same command
// and configs, the same settings for every run already there, but for the keys a resume may
// change) continues them; another one would resume or report them as runs of settings they did
// not have.
void check_same_sweep(const SweepSpec& spec, const fs::path& out) {
  const fs::path file = out / "sweep.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return;
  nlohmann::json before;
  try {
    before = nlohmann::json::parse(io::read_file(file));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: not JSON ({}); restore it, or use another --out", file.string(), e.what());
  }
  const nlohmann::json now = sweep_manifest(spec);
  std::vector<std::string> changed, allowed;
  for (const char* key : {"command", "configs", "baseline", "retrain"})
    if (before.value(key, nlohmann::json()) != now[key]) changed.push_back(key);
  compare_settings(before.value("set", nlohmann::json()), now["set"], "set: ", changed, allowed);
  std::map<std::string, nlohmann::json> old_points;
  for (const auto& p : before.value("points", nlohmann::json::array()))
    if (p.is_object() && p.contains("name") && p["name"].is_string())
      old_points[p["name"].get<std::string>()] = p;
  for (const auto& p : now["points"]) {
    const std::string name = p["name"].get<std::string>();
    const auto it = old_points.find(name);
    if (it == old_points.end() || !fs::exists(out / name, ec)) continue;
    compare_settings(it->second.value("values", nlohmann::json()), p["values"],
                     "run " + name + ": ", changed, allowed);
    for (const char* key : {"is_control", "control"})
      if (it->second.value(key, nlohmann::json()) != p[key])
        changed.push_back(fmt::format("run {}: {}", name, key));
  }
  HC_CHECK(changed.empty(),
           "{} holds the runs of another sweep ({} differ from {}'s): they would be resumed or "
           "reported under settings they were not started with. Use another --out, or the sweep "
           "file they came from ({})",
           out.string(), fmt::join(changed, ", "), spec.file.string(),
           before.value("sweep_file", std::string("?")));
  if (!allowed.empty())
    log::info("sweep: continuing with {} changed (as a resumed run may)", fmt::join(allowed, ", "));
}

// A run of the sweep: its own process group (a terminal's Ctrl-C reaches the sweep alone, which
// passes one SIGTERM on; a run takes a second signal as "stop at once"), SIGTERM when the sweep
// dies, output appended to its log.
process::ChildOptions run_options(const fs::path& executable, const std::vector<std::string>& args,
                                  const fs::path& log,
                                  const std::vector<std::string>& prefix = {}) {
  process::ChildOptions o;
  o.argv = prefix;
  o.argv.push_back(executable.string());
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.output_file = log;
  o.stdin_null = true;
  o.die_with_parent = true;
  return o;
}

pid_t spawn(const fs::path& executable, const std::vector<std::string>& args, const fs::path& log,
            const std::vector<std::string>& prefix = {}) {
  return process::start(run_options(executable, args, log, prefix)).pid;
}

pid_t start_job(const Job& job, const fs::path& executable, int srun_tasks) {
  fs::create_directories(job.dir);
  std::error_code ec;
  fs::remove(exit_file(job.dir), ec);
  {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char when[64];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    // Checked append: a full disk is an error naming the log, not a run without its header.
    io::append_line(run::RunFolder{job.dir}.sweep_log(),
                    fmt::format("=== headcount sweep: {} started {} ===", job.name, when));
  }
  std::vector<std::string> prefix;
  if (srun_tasks > 1) {
    // Several processes per run (data-parallel): Slurm starts them inside the allocation.
    prefix = {"srun", fmt::format("--ntasks={}", srun_tasks), "--kill-on-bad-exit=1"};
  }
  return spawn(executable, job.args, run::RunFolder{job.dir}.sweep_log(), prefix);
}

}  // namespace

int run_command(const fs::path& executable, const std::vector<std::string>& args,
                const fs::path& log) {
  return process::run(run_options(executable, args, log));
}

namespace {

void check_sweep_options(const SweepSpec& spec, const SweepOptions& options) {
  HC_CHECK(options.workers >= 1, "--workers must be at least 1");
  if (options.only) {
    HC_CHECK(*options.only < spec.points.size(), "--only {}: the sweep has {} runs (0 to {})",
             *options.only, spec.points.size(), spec.points.size() - 1);
  }
  for (const auto& n : options.names) {
    bool known = false;
    std::vector<std::string> all;
    for (const auto& p : spec.points) known |= p.name == n, all.push_back(p.name);
    HC_CHECK(known, "--runs: the sweep has no run named '{}' (its runs: {})", n,
             fmt::join(all, ", "));
  }
}

struct Running {
  Job job;
  std::chrono::steady_clock::time_point start;
};

// The sweep's jobs while it runs: those ready to start, the retrainings waiting for their prune
// run, the running processes, and what has happened so far.
struct SweepQueue {
  SweepQueue(const SweepSpec& s, const SweepOptions& o, int threads)
      : spec(s), options(o), threads_blas(threads) {}
  const SweepSpec& spec;
  const SweepOptions& options;
  int threads_blas;
  std::deque<Job> ready;
  std::vector<size_t> retrain_waiting;  // points whose retraining waits for the prune run
  SweepOutcome outcome;
  std::map<pid_t, Running> running;
  int forwarded = 0;  // stop signals passed on to the runs
};

// The selected points' jobs not finished yet (a finished prune run's retraining, where needed).
void queue_jobs(SweepQueue& q) {
  const SweepSpec& spec = q.spec;
  const SweepOptions& options = q.options;
  for (size_t i = 0; i < spec.points.size(); ++i) {
    if (options.only && *options.only != i) continue;
    if (!options.names.empty() && std::find(options.names.begin(), options.names.end(),
                                            spec.points[i].name) == options.names.end())
      continue;
    const bool retrain = spec.retrain && !options.no_retrain;
    const Job job = point_job(spec, i, options.out, q.threads_blas);
    if (run_state(job.dir) == RunState::kDone) {
      ++q.outcome.skipped;
      if (retrain && retrain_needed(job)) {
        const Job r = retrain_job(spec, i, options.out, q.threads_blas);
        if (run_state(r.dir) == RunState::kDone)
          ++q.outcome.skipped;
        else
          q.ready.push_back(r);
      }
    } else {
      q.ready.push_back(job);
      if (retrain) q.retrain_waiting.push_back(i);
    }
  }
}

void summary_line(const SweepQueue& q) {
  std::optional<double> best;
  std::string best_name;
  for (const auto& p : q.spec.points) {
    const auto b = run_bleu(q.options.out / p.name);
    if (b && (!best || *b > *best)) best = b, best_name = p.name;
  }
  const size_t pending = q.ready.size() + q.retrain_waiting.size();
  log::info("sweep: {} done, {} running, {} failed, {} pending{}", q.outcome.done, q.running.size(),
            q.outcome.failed, pending,
            best ? fmt::format("; best dev BLEU so far {:.2f} ({})", *best, best_name) : "");
}

// Starts ready jobs while a worker is free (none after a stop signal).
void start_ready_jobs(SweepQueue& q) {
  while (!StopSignals::count() && q.running.size() < static_cast<size_t>(q.options.workers) &&
         !q.ready.empty()) {
    Job job = q.ready.front();
    q.ready.pop_front();
    if (const auto holder = io::RunLock::holder(job.dir)) {
      log::warn(
          "sweep: {} is being written by another process (PID {}): not started; run the "
          "sweep again when that process has ended",
          job.name, *holder);
      q.outcome.busy_names.push_back(job.name);
      continue;
    }
    const RunState before = run_state(job.dir);
    const pid_t pid = start_job(job, q.options.executable, q.options.srun_tasks);
    log::info("sweep: {} {} (log: {})",
              before == RunState::kPending  ? "starting"
              : before == RunState::kFailed ? "retrying"
                                            : "resuming",
              job.name, (run::RunFolder{job.dir}.sweep_log()).string());
    q.running.emplace(pid, Running{job, std::chrono::steady_clock::now()});
  }
}

// Passes the stop signals received on to the runs, each once.
void forward_stop_signals(SweepQueue& q) {
  if (StopSignals::count() >= 1 && q.forwarded == 0) {
    log::info(
        "sweep: stopping: the running runs save a checkpoint and stop (a second Ctrl-C "
        "stops them at once); run the same command to resume");
    for (const auto& [p, r] : q.running) kill(-p, SIGTERM);
    q.forwarded = 1;
  }
  if (StopSignals::count() >= 2 && q.forwarded == 1) {
    log::warn("sweep: second signal: stopping the runs at once (without saving)");
    for (const auto& [p, r] : q.running) kill(-p, SIGTERM);
    q.forwarded = 2;
  }
}

// How a run's process ended.
struct JobEnd {
  Job job;
  double seconds = 0;
  int code = 0, sig = 0;
  bool finished = false, failed = false;
};

// Takes the ended process off the running ones and records its end in the run's exit file.
JobEnd end_job(SweepQueue& q, std::map<pid_t, Running>::iterator it, int status) {
  JobEnd e;
  e.job = it->second.job;
  e.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.start).count();
  q.running.erase(it);
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  e.sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  const RunState after = run_state(e.job.dir);
  e.finished = after == RunState::kDone;
  // Stopped on request: saved and resumable (exit status 3), or stopped at once by a second
  // signal, or ended by the signal before it could install its handler.
  const bool stopped = e.code == kExitInterrupted ||
                       (StopSignals::count() &&
                        (e.code == 0 || e.code == 130 || e.sig == SIGTERM || e.sig == SIGINT));
  e.failed = !e.finished && !stopped;
  io::write_file_atomic(
      exit_file(e.job.dir),
      nlohmann::json(
          {{"exit_code", e.code}, {"signal", e.sig}, {"failed", e.failed}, {"seconds", e.seconds}})
              .dump() +
          "\n");
  return e;
}

void forget_retraining(SweepQueue& q, size_t point) {
  q.retrain_waiting.erase(std::remove(q.retrain_waiting.begin(), q.retrain_waiting.end(), point),
                          q.retrain_waiting.end());
}

// Counts and logs the ended run; a finished prune run's retraining becomes ready.
void record_end(SweepQueue& q, const JobEnd& e) {
  const Job& job = e.job;
  if (e.finished) {
    ++q.outcome.done;
    const auto b = run_bleu(job.dir);
    log::info("sweep: {} finished in {}{}", job.name, log::duration(e.seconds),
              b ? fmt::format(", dev BLEU {:.2f}", *b) : "");
    if (!job.retrain && q.spec.retrain && !q.options.no_retrain) {
      forget_retraining(q, job.point);
      if (retrain_needed(job))
        q.ready.push_back(retrain_job(q.spec, job.point, q.options.out, q.threads_blas));
    }
  } else if (e.failed) {
    ++q.outcome.failed;
    q.outcome.failed_names.push_back(job.name);
    std::string why =
        e.sig ? fmt::format("killed by signal {}", e.sig) : fmt::format("exit code {}", e.code);
    log::warn("sweep: {} FAILED ({}); end of {}:", job.name, why,
              (run::RunFolder{job.dir}.sweep_log()).string());
    for (const auto& l : tail_lines(run::RunFolder{job.dir}.sweep_log(), 12))
      log::warn("  | {}", l);
    if (!job.retrain) forget_retraining(q, job.point);  // its retraining cannot run
  } else {
    ++q.outcome.interrupted;
    log::info("sweep: {} stopped; it resumes from its last checkpoint next time", job.name);
  }
}

// Runs the queue until every job has ended, or until the runs stopped on a signal.
void run_jobs(SweepQueue& q) {
  while (true) {
    start_ready_jobs(q);
    if (q.running.empty()) break;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        forward_stop_signals(q);
        continue;
      }
      break;
    }
    const auto it = q.running.find(pid);
    if (it == q.running.end()) continue;
    record_end(q, end_job(q, it, status));
    summary_line(q);
  }
}

}  // namespace

SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options) {
  check_sweep_options(spec, options);
  fs::create_directories(options.out);
  io::RunLock lock;
  if (!options.dry_run && !options.only) {
    lock = io::RunLock::acquire(options.out);
    lock.keep_file();
  }
  check_same_sweep(spec, options.out);
  if (!options.only)
    write_manifest(spec, options.out);
  else if (!fs::exists(options.out / "sweep.json"))
    write_manifest(spec, options.out);

  const int cores = options.cores > 0 ? options.cores : runtime::num_cores();
  SweepQueue q(spec, options, std::max(1, cores / options.workers));
  queue_jobs(q);
  const size_t total_jobs = q.ready.size() + q.retrain_waiting.size();
  if (options.dry_run) return q.outcome;
  if (q.outcome.skipped > 0)
    log::info("sweep: {} run(s) already finished, skipped", q.outcome.skipped);
  if (total_jobs == 0) {
    log::info("sweep: every run is finished");
    return q.outcome;
  }
  // Stop signals are counted (no restarted system calls: waitpid returns on one) and passed on
  // to the runs: the first as SIGINT, the second as SIGTERM.
  const StopSignals stop_signals(StopSignals::Options{.restart = false, .exit_on = 0});
  run_jobs(q);
  if (!q.outcome.failed_names.empty()) {
    log::warn("sweep: {} run(s) failed: {} (their logs: RUN/log.txt; run the sweep again to retry)",
              q.outcome.failed_names.size(), fmt::join(q.outcome.failed_names, ", "));
  }
  return q.outcome;
}

fs::path write_slurm_script(const SweepSpec& spec, const SweepOptions& options) {
  const fs::path out = fs::absolute(options.out);
  fs::create_directories(out / "slurm");
  write_manifest(spec, options.out);
  const auto& s = spec.slurm;
  std::string stem = spec.file.stem().string();
  std::string script = "#!/bin/bash\n";
  script += fmt::format("# headcount sweep {}: {} run(s), one array task each.\n",
                        spec.file.string(), spec.points.size());
  script += fmt::format("# Submit with: sbatch {}\n", (out / "sweep.sbatch").string());
  script += fmt::format("#SBATCH --job-name=headcount-{}\n", name_text(stem));
  script += fmt::format("#SBATCH --array=0-{}\n", spec.points.size() - 1);
  script += fmt::format("#SBATCH --ntasks={}\n", s.ntasks);
  script += fmt::format("#SBATCH --cpus-per-task={}\n", s.cpus_per_task);
  script += fmt::format("#SBATCH --mem={}\n", s.mem);
  script += fmt::format("#SBATCH --time={}\n", s.time);
  if (!s.partition.empty()) script += fmt::format("#SBATCH --partition={}\n", s.partition);
  if (!s.account.empty()) script += fmt::format("#SBATCH --account={}\n", s.account);
  script += fmt::format("#SBATCH --output={}\n", (out / "slurm" / "%A_%a.out").string());
  for (const auto& e : s.extra) script += fmt::format("#SBATCH {}\n", e);
  script += "set -euo pipefail\n";
  script += fmt::format("cd '{}'\n", fs::current_path().string());
  script += "# Each task runs one point (and its retraining from scratch when the sweep asks);\n";
  script +=
      "# a finished run is skipped and an interrupted one resumes, so resubmitting is safe.\n";
  std::string srun;
  if (s.ntasks > 1) {
    script += fmt::format(
        "# {} processes per run (data-parallel over c10d): the sweep starts each run with srun;\n"
        "# the first node of the job serves the rendezvous.\n",
        s.ntasks);
    script += "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
    script += "export MASTER_PORT=$((20000 + SLURM_ARRAY_JOB_ID % 20000 + SLURM_ARRAY_TASK_ID))\n";
    srun = fmt::format(" --srun-tasks {}", s.ntasks);
  }
  script += fmt::format(
      "exec '{}' sweep '{}' --out '{}' --only \"$SLURM_ARRAY_TASK_ID\" --cores "
      "\"${{SLURM_CPUS_PER_TASK:-{}}}\"{}\n",
      fs::absolute(options.executable).string(), fs::absolute(spec.file).string(), out.string(),
      s.cpus_per_task, srun);
  const fs::path path = out / "sweep.sbatch";
  io::write_file_atomic(path, script);
  fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add);
  return path;
}

void submit_slurm_script(const fs::path& script) {
  HC_CHECK(std::system("command -v sbatch >/dev/null 2>&1") == 0,
           "--submit: sbatch not found on PATH (submit {} on the cluster's login node)",
           script.string());
  const int rc = std::system(fmt::format("sbatch '{}'", script.string()).c_str());
  HC_CHECK(rc == 0, "sbatch {} failed (exit status {})", script.string(), rc);
}

std::string dry_run_listing(const SweepSpec& spec, const std::string& file, const fs::path& out,
                            int cores, int workers) {
  const int blas =
      std::max(1, (cores > 0 ? cores : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))) / workers);
  std::string s =
      fmt::format("{} run(s) from {} into {}:\n", spec.points.size(), file, out.string());
  for (size_t i = 0; i < spec.points.size(); ++i) {
    const auto j = point_job(spec, i, out, blas);
    s += fmt::format("[{}] {}\n    headcount {}\n", i, j.name, fmt::join(j.args, " "));
    if (spec.retrain) {
      const auto r = retrain_job(spec, i, out, blas);
      s += fmt::format("    then: headcount {}\n", fmt::join(r.args, " "));
    }
  }
  return s;
}

}  // namespace headcount::sweep
