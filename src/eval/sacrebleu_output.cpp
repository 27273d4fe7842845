#include "headcount/eval/sacrebleu_output.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace headcount::eval {

namespace {

// sacreBLEU's json carries the signature's fields too ("nrefs", "case", "tok", ...).
void add_signature_fields(nlohmann::ordered_json& j, const std::string& signature) {
  size_t start = 0;
  while (start < signature.size()) {
    size_t bar = signature.find('|', start);
    if (bar == std::string::npos) bar = signature.size();
    const std::string part = signature.substr(start, bar - start);
    const size_t colon = part.find(':');
    if (colon != std::string::npos) j[part.substr(0, colon)] = part.substr(colon + 1);
    start = bar + 1;
  }
}

// Counts print as integers where they are whole, as Python's ints do.
nlohmann::ordered_json numbers(const std::vector<double>& v) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (double x : v) {
    if (x == static_cast<double>(static_cast<long long>(x))) {
      out.push_back(static_cast<long long>(x));
    } else {
      out.push_back(x);
    }
  }
  return out;
}

std::string paired_json(const PairedComparison& c, const std::string& baseline_file,
                        const std::string& system_file) {
  const PairedTestResult& r = c.result;
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["signature"] = c.signature;
  j["test"] = r.test;
  j["samples"] = r.samples;
  j["seed"] = r.seed;
  j["baseline"] = {{"file", baseline_file},
                   {"score", r.baseline_score},
                   {"mean", r.baseline.mean},
                   {"ci", r.baseline.ci}};
  j["system"] = {{"file", system_file},   {"score", r.system_score},
                 {"mean", r.system.mean}, {"ci", r.system.ci},
                 {"p_value", r.p_value},  {"difference", r.system_score - r.baseline_score}};
  return j.dump(1);
}

}  // namespace

std::string format_bleu(const BleuScore& s, const std::string& signature,
                        const OutputStyle& style) {
  const std::string score = fmt::format("{:.{}f}", s.score, style.width);
  if (style.json) {
    nlohmann::ordered_json j;
    j["name"] = "BLEU";
    j["score"] = s.score;
    j["signature"] = signature;
    j["verbose_score"] = s.verbose(style.width);
    j["counts"] = numbers(s.counts);
    j["totals"] = numbers(s.totals);
    j["precisions"] = s.precisions;
    j["bp"] = s.bp;
    j["ratio"] = s.ratio;
    j["sys_len"] = static_cast<long long>(s.sys_len);
    j["ref_len"] = static_cast<long long>(s.ref_len);
    add_signature_fields(j, signature);
    return j.dump(style.compact ? -1 : 1);
  }
  if (style.score_only) return score;
  return fmt::format("BLEU|{} = {} {}", signature, score, s.verbose(style.width));
}

std::string format_chrf(const ChrfScore& s, const std::string& name, const std::string& signature,
                        const OutputStyle& style) {
  const std::string score = fmt::format("{:.{}f}", s.score, style.width);
  if (style.json) {
    nlohmann::ordered_json j;
    j["name"] = name;
    j["score"] = s.score;
    j["signature"] = signature;
    nlohmann::ordered_json stats = nlohmann::ordered_json::array();
    for (const auto& st : s.stats) stats.push_back(numbers(st));
    j["stats"] = stats;
    add_signature_fields(j, signature);
    return j.dump(style.compact ? -1 : 1);
  }
  if (style.score_only) return score;
  return fmt::format("{}|{} = {}", name, signature, score);
}

std::string format_paired(const PairedComparison& c, const std::string& baseline_file,
                          const std::string& system_file, const OutputStyle& style) {
  if (style.json) return paired_json(c, baseline_file, system_file);
  const PairedTestResult& r = c.result;
  const int w = style.width;
  if (style.score_only)
    return fmt::format("{:.{}f} {:.{}f} {:.4f}", r.baseline_score, w, r.system_score, w, r.p_value);
  const bool bs = r.test == "bs";
  const std::string test_name =
      bs ? "paired bootstrap resampling" : "paired approximate randomization";
  std::string out = fmt::format("{}|{}\n", c.name, c.signature);
  out += fmt::format("{}, {} {}, seed {}\n", test_name, r.samples, bs ? "resamples" : "trials",
                     r.seed);
  out += fmt::format("baseline {}: {} = {:.{}f} (mean {:.{}f} +- {:.{}f})\n", baseline_file, c.name,
                     r.baseline_score, w, r.baseline.mean, w, r.baseline.ci, w);
  out += fmt::format(
      "system   {}: {} = {:.{}f} (mean {:.{}f} +- {:.{}f}) difference {:+.{}f}, p = {:.4f}{}",
      system_file, c.name, r.system_score, w, r.system.mean, w, r.system.ci, w,
      r.system_score - r.baseline_score, w, r.p_value,
      r.p_value < 0.05 ? " (significant at 0.05)" : "");
  return out;
}

}  // namespace headcount::eval
