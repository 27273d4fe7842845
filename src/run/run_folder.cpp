#include "headcount/run/run_folder.h"

#include <fmt/format.h>

#include <map>
#include <type_traits>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/provenance.h"
#include "headcount/common/run_guard.h"
#include "headcount/common/text.h"

namespace headcount::run {

fs::path RunFolder::step_checkpoint(int64_t step) const {
  return checkpoints() / fmt::format("step-{}", step);
}

std::vector<int64_t> RunFolder::checkpoint_steps() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.size() > 5 &&
        name.find_first_not_of("0123456789", 5) == std::string::npos)
      steps.push_back(std::stoll(name.substr(5)));
  }
  return steps;
}

bool RunFolder::is_early_run_file(const std::string& name) {
  return name == "config.yaml" || name == kMetrics || name == kGates || name == "checkpoints" ||
         name == "log.txt" || name == "sweep-exit.json" || name == ".lock" ||
         name == "gate-seeds";  // prune.gate_seeds' runs, before the run's own first step
}

std::vector<nlohmann::json> read_jsonl(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::error_code ec;
  if (!fs::exists(file, ec)) return out;
  const auto lines = io::read_lines(file, {.allow_empty_file = true});
  size_t last = lines.size();  // the last non-empty line: the one an interruption can cut short
  while (last > 0 && lines[last - 1].empty()) --last;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(lines[i]));
    } catch (const nlohmann::json::exception& e) {
      if (i + 1 != last)
        log::warn("{} line {} is not JSON ({}): skipped; the lines after it are read",
                  file.string(), i + 1, e.what());
    }
  }
  return out;
}

void append_jsonl(const fs::path& file, const nlohmann::json& record) {
  io::append_line(file, record.dump());
}

void trim_jsonl(const fs::path& file, const std::function<bool(const nlohmann::json&)>& keep) {
  std::vector<std::string> kept;
  for (const auto& line : io::read_lines(file, {.allow_empty_file = true})) {
    if (line.empty()) continue;
    try {
      if (keep(nlohmann::json::parse(line))) kept.push_back(line);
    } catch (const nlohmann::json::exception&) {
      // a line cut short by an interruption
    }
  }
  io::write_lines_atomic(file, kept);
}

std::optional<nlohmann::json> eval_record(const fs::path& metrics, int64_t step) {
  std::optional<nlohmann::json> found;
  for (auto& j : read_jsonl(metrics)) {
    if (j.value("event", "") == "eval" && j.value("step", int64_t{-1}) == step) found = j;
  }
  return found;
}

nlohmann::json GateSnapshot::to_json() const {
  nlohmann::json heads_json = nlohmann::json::array();
  for (const auto& h : heads) {
    heads_json.push_back(
        {model::attention_name(h.head.type), h.head.layer, h.head.head, h.p_open, h.gate});
  }
  return {{"step", step}, {"dev_bleu", dev_bleu}, {"final", final}, {"heads", heads_json}};
}

void append_gates(const fs::path& file, const GateSnapshot& snapshot) {
  append_jsonl(file, snapshot.to_json());
}

namespace {

// The summary's fields by key, in the order they are written; one list serves both directions.
template <typename Summary, typename Visit>
void summary_fields(Summary& s, Visit&& v) {
  v("status", s.status);
  v("command", s.command);
  v("method", s.method);
  v("steps", s.steps);
  v("best_step", s.best_step);
  v("best_metric", s.best_metric);
  v("best_score", s.best_score);
  v("precision", s.precision);
  v("precision_reason", s.precision_reason);
  v("train_seconds", s.train_seconds);
  v("target_tokens_per_s", s.target_tokens_per_s);
  v("world_size", s.world_size);
  v("parameters_identical_across_processes", s.parameters_identical_across_processes);
  v("seconds", s.seconds);
  v("pruning_seconds", s.pruning_seconds);
  v("dev_bleu_start", s.dev_bleu_start);
  v("dev_bleu_end", s.dev_bleu_end);
}

}  // namespace

nlohmann::ordered_json RunSummary::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  summary_fields(*this, [&](const char* key, const auto& field) {
    if (field) j[key] = *field;
  });
  return j;
}

RunSummary RunSummary::from_json(const nlohmann::json& j, const std::string& origin) {
  HC_CHECK(j.is_object(), "{}: expected a JSON object", origin);
  RunSummary s;
  summary_fields(s, [&](const char* key, auto& field) {
    const auto it = j.find(key);
    if (it == j.end()) return;
    using T = typename std::decay_t<decltype(field)>::value_type;
    try {
      field = it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      HC_FAIL("{}: \"{}\" is {}, expected a {}", origin, key, it->dump(),
              std::is_same_v<T, std::string> ? "string"
              : std::is_same_v<T, bool>      ? "boolean"
                                             : "number");
    }
  });
  HC_CHECK(s.status || s.method, "{}: neither \"status\" nor \"method\": not a run summary",
           origin);
  return s;
}

void write_summary(const RunFolder& folder, const RunSummary& summary) {
  auto j = summary.to_json();
  j["provenance"] = provenance::record();  // the commit, machine, LibTorch the run ended on
  io::write_file_atomic(folder.summary(), j.dump(2) + "\n");
}

RunSummary read_summary(const RunFolder& folder) {
  const auto file = folder.summary();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::read_file(file));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: not JSON ({})", file.string(), e.what());
  }
  return RunSummary::from_json(j, file.string());
}

std::vector<GateSnapshot> read_gates(const fs::path& file) {
  std::vector<GateSnapshot> out;
  const auto lines = io::read_lines(file, {.allow_empty_file = true});
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    try {
      const auto j = nlohmann::json::parse(lines[i]);
      GateSnapshot s;
      s.step = j.at("step").get<int64_t>();
      s.dev_bleu = j.at("dev_bleu").get<double>();
      s.final = j.at("final").get<bool>();
      for (const auto& h : j.at("heads")) {
        GateValue v;
        v.head = {model::attention_from_name(h.at(0).get<std::string>()), h.at(1).get<int64_t>(),
                  h.at(2).get<int64_t>()};
        v.p_open = h.at(3).get<double>();
        v.gate = h.at(4).get<double>();
        s.heads.push_back(v);
      }
      out.push_back(std::move(s));
    } catch (const std::exception& e) {
      throw Error(
          fmt::format("{} line {}: expected {{\"step\", \"dev_bleu\", \"final\", \"heads\": "
                      "[[attention, layer, head, p_open, gate], ...]}} ({})",
                      file.string(), i + 1, e.what()));
    }
  }
  return out;
}

std::string head_removal_csv(const std::vector<HeadRemoval>& rows, HeadRemovalKind kind) {
  std::string csv = kind == HeadRemovalKind::kL0
                        ? "attention,layer,head,removal_step,p_open,gate,dev_bleu_at_removal\n"
                        : "attention,layer,head,removal_step,fisher,kept,dev_bleu_at_removal\n";
  for (const auto& r : rows) {
    const std::string step = r.removal_step ? std::to_string(*r.removal_step) : "";
    const std::string head =
        fmt::format("{},{},{}", model::attention_name(r.head.type), r.head.layer, r.head.head);
    if (kind == HeadRemovalKind::kL0) {
      csv += fmt::format("{},{},{:.6f},{:.6f},{}\n", head, step, r.p_open.value_or(0),
                         r.gate.value_or(0), r.dev_bleu ? fmt::format("{:.2f}", *r.dev_bleu) : "");
    } else {
      csv += fmt::format("{},{},{:.6g},{},\n", head, step, r.fisher.value_or(0),
                         r.removal_step ? 0 : 1);
    }
  }
  return csv;
}

void write_head_removal(const fs::path& file, const std::vector<HeadRemoval>& rows,
                        HeadRemovalKind kind) {
  io::write_file_atomic(file, head_removal_csv(rows, kind));
}

std::vector<HeadRemoval> read_head_removal(const fs::path& file) {
  const auto lines = io::read_lines(file);
  const auto header = text::split(lines.at(0), ',');
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* required : {"attention", "layer", "head", "removal_step"}) {
    HC_CHECK(col.count(required),
             "{} line 1: no '{}' column (expected attention,layer,head,"
             "removal_step,...)",
             file.string(), required);
  }
  std::vector<HeadRemoval> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const auto f = text::split(lines[i], ',');
    HC_CHECK(f.size() == header.size(), "{} line {}: {} fields, the header has {}", file.string(),
             i + 1, f.size(), header.size());
    auto field = [&](const char* name) -> std::optional<std::string> {
      const auto it = col.find(name);
      if (it == col.end() || f[it->second].empty()) return std::nullopt;
      return f[it->second];
    };
    HeadRemoval r;
    try {
      r.head = {model::attention_from_name(f[col["attention"]]), std::stoll(f[col["layer"]]),
                std::stoll(f[col["head"]])};
      if (auto v = field("removal_step")) r.removal_step = std::stoll(*v);
      if (auto v = field("p_open")) r.p_open = std::stod(*v);
      if (auto v = field("gate")) r.gate = std::stod(*v);
      if (auto v = field("fisher")) r.fisher = std::stod(*v);
      if (auto v = field("dev_bleu_at_removal")) r.dev_bleu = std::stod(*v);
    } catch (const std::exception& e) {
      throw Error(fmt::format("{} line {}: expected attention,layer,head,removal_step,... ({})",
                              file.string(), i + 1, e.what()));
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace headcount::run
