// pruning.json and README.md (prune/outcome.h).
#include "headcount/prune/outcome.h"

#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"

namespace headcount::prune {
namespace {

template <typename T>
T field(const nlohmann::ordered_json& j, const char* key, const std::string& file) {
  HC_CHECK(j.is_object() && j.contains(key), "{}: no '{}'", file, key);
  // Counts are whole numbers: a float (1e300) would convert to a meaningless integer.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    HC_CHECK(j.at(key).is_number_integer(), "{}: '{}' is {}, expected a whole number", file, key,
             j.at(key).dump());
  if constexpr (std::is_floating_point_v<T>)
    HC_CHECK(j.at(key).is_number(), "{}: '{}' is {}, expected a number", file, key,
             j.at(key).dump());
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: '{}' is not of its type ({})", file, key, e.what());
  }
}

template <typename T>
std::optional<T> optional_field(const nlohmann::ordered_json& j, const char* key,
                                const std::string& file) {
  if (!j.is_object() || !j.contains(key)) return std::nullopt;
  return field<T>(j, key, file);
}

nlohmann::ordered_json fisher_seconds_json(const FisherSeconds& s) {
  return {{"pruning", s.pruning},
          {"calibration", s.calibration},
          {"search", s.search},
          {"rearrange", s.rearrange},
          {"reconstruct", s.reconstruct},
          {"save", s.save},
          {"dev_evaluations", s.dev_evaluations}};
}

void add_fisher_details(const FisherDetails& f, nlohmann::ordered_json& j) {
  j["calibration_sentences"] = f.calibration_sentences;
  j["calibration_target_tokens"] = f.calibration_target_tokens;
  j["removed_diagonal_fisher"] = f.removed_diagonal_fisher;
  j["rearrange"] = f.rearrange;
  j["layers_rearranged"] = f.layers_rearranged;
  j["reconstruct"] = f.reconstruct;
  j["reconstruct_mode"] = f.reconstruct_mode;
  j["ridge"] = f.ridge;
  j["layers_refit"] = f.layers_refit;
  auto refits = nlohmann::ordered_json::array();
  for (const auto& r : f.refits)
    refits.push_back({{"layer", r.layer},
                      {"heads_kept", r.heads_kept},
                      {"heads", r.heads},
                      {"tokens", r.tokens},
                      {"target_sum_of_squares", r.target_sq},
                      {"error_before", r.error_before},
                      {"error_after", r.error_after},
                      {"relative_error_before", r.relative_before()},
                      {"relative_error_after", r.relative_after()}});
  j["refits"] = refits;
  j["seconds"] = fisher_seconds_json(f.seconds);
}

FisherDetails read_fisher_details(const nlohmann::ordered_json& j, const std::string& file) {
  FisherDetails f;
  f.calibration_sentences = field<int64_t>(j, "calibration_sentences", file);
  f.calibration_target_tokens = field<int64_t>(j, "calibration_target_tokens", file);
  f.removed_diagonal_fisher = field<double>(j, "removed_diagonal_fisher", file);
  f.rearrange = field<bool>(j, "rearrange", file);
  f.layers_rearranged = field<int64_t>(j, "layers_rearranged", file);
  f.reconstruct = field<bool>(j, "reconstruct", file);
  // Records written before the mode was a choice refit in one pass.
  f.reconstruct_mode =
      optional_field<std::string>(j, "reconstruct_mode", file).value_or("one_pass");
  f.ridge = field<double>(j, "ridge", file);
  f.layers_refit = field<int64_t>(j, "layers_refit", file);
  // Records written before the per-layer errors were kept have no "refits".
  for (const auto& r : optional_field<nlohmann::ordered_json>(j, "refits", file)
                           .value_or(nlohmann::ordered_json::array())) {
    const std::string in = file + ": refits";
    f.refits.push_back({field<std::string>(r, "layer", in), field<int64_t>(r, "heads_kept", in),
                        field<int64_t>(r, "heads", in), field<int64_t>(r, "tokens", in),
                        field<double>(r, "target_sum_of_squares", in),
                        field<double>(r, "error_before", in), field<double>(r, "error_after", in)});
  }
  const auto s = field<nlohmann::ordered_json>(j, "seconds", file);
  const std::string in = file + ": seconds";
  f.seconds = {field<double>(s, "pruning", in),        field<double>(s, "calibration", in),
               field<double>(s, "search", in),         field<double>(s, "rearrange", in),
               field<double>(s, "reconstruct", in),    field<double>(s, "save", in),
               field<double>(s, "dev_evaluations", in)};
  return f;
}

std::string l0_readme(const PruneOutcome& o) {
  return fmt::format(
      "# Pruning run\n\nFrom `{}`, gates on {} ({}), {} steps.\n\n"
      "| | heads (enc / dec / enc-dec) | parameters | dev BLEU |\n| --- | --- | ---: | ---: |\n"
      "| start | {} | {} | {:.2f} |\n| end (pruned/) | {} | {} | {:.2f} |\n\n"
      "Heads in the order they were removed (head_removal.csv; removal_step is the first "
      "evaluation "
      "from which the head's gate stayed 0):\n\n```\n",
      o.init_from, fmt::join(o.attention_gated, ", "),
      !o.target_heads_per_type.empty()
          ? fmt::format("target {} heads per type", fmt::join(o.target_heads_per_type, "/"))
      : o.target_heads > 0 ? fmt::format("target {} heads", o.target_heads)
                           : fmt::format("lambda {}", o.lambda),
      o.steps, o.heads_before, o.parameters_before, o.dev_bleu_start, o.heads_after,
      o.parameters_after, o.dev_bleu_end);
}

// The refit layers' errors as a table (empty without a refit).
std::string refits_table(const std::vector<LayerRefit>& refits) {
  if (refits.empty()) return "";
  std::string md =
      "Each refit layer's squared error against its target on the calibration tokens, relative "
      "to the target's sum of squares (pruning.json: refits):\n\n"
      "| layer | heads kept | tokens | before the refit | after |\n"
      "| --- | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : refits)
    md += fmt::format("| {} | {} of {} | {} | {:.4f} | {:.4f} |\n", r.layer, r.heads_kept, r.heads,
                      r.tokens, r.relative_before(), r.relative_after());
  return md + "\n";
}

std::string fisher_readme(const PruneOutcome& o) {
  const FisherDetails& f = *o.fisher;
  return fmt::format(
      "# Pruning run (Fisher, post-training)\n\nFrom `{}`: Fisher head masks (Kwon et al. 2022) "
      "on {}, budget {}, {} calibration sentences, rearrangement {}, reconstruction {} (ridge "
      "{}); {:.1f} s of pruning.\n\n"
      "| | heads (enc / dec / enc-dec) | parameters | decoding FLOPs | dev BLEU |\n"
      "| --- | --- | ---: | ---: | ---: |\n"
      "| start | {} | {} | 1.000 | {:.2f} |\n| end (pruned/) | {} | {} | {:.3f} | {:.2f} |\n\n{}"
      "Heads in the order the search removed them (head_removal.csv: removal_step is the rank, "
      "lowest diagonal Fisher first; kept heads last):\n\n```\n",
      o.init_from, fmt::join(o.attention_gated, ", "), o.budget.value_or(nullptr).dump(),
      f.calibration_sentences, f.rearrange ? "on" : "off", f.reconstruct_mode, f.ridge,
      f.seconds.pruning, o.heads_before, o.parameters_before, o.dev_bleu_start, o.heads_after,
      o.parameters_after, o.decode_flops_fraction.value_or(0.0), o.dev_bleu_end,
      refits_table(f.refits));
}

}  // namespace

nlohmann::ordered_json PruneOutcome::to_json() const {
  nlohmann::ordered_json j;
  if (method) j["method"] = *method;
  j["init_from"] = init_from;
  j["attention_gated"] = attention_gated;
  j["lambda"] = lambda;
  j["target_heads"] = target_heads;
  if (!target_heads_per_type.empty()) j["target_heads_per_type"] = target_heads_per_type;
  j["steps"] = steps;
  if (budget) j["budget"] = *budget;
  j["heads_before_e_d_de"] = heads_before;
  j["heads_after_e_d_de"] = heads_after;
  j["heads_after"] = architecture_after.to_json();
  if (heads_open_by_gates) j["heads_open_by_gates"] = *heads_open_by_gates;
  j["parameters_before"] = parameters_before;
  j["parameters_after"] = parameters_after;
  if (decode_flops_fraction) j["decode_flops_fraction"] = *decode_flops_fraction;
  j["dev_bleu_start"] = dev_bleu_start;
  j["dev_bleu_end"] = dev_bleu_end;
  if (fisher) add_fisher_details(*fisher, j);
  j["pruned_checkpoint"] = pruned_checkpoint;
  return j;
}

PruneOutcome PruneOutcome::from_json(const nlohmann::ordered_json& j, const std::string& file) {
  PruneOutcome o;
  o.method = optional_field<std::string>(j, "method", file);
  o.init_from = field<std::string>(j, "init_from", file);
  o.attention_gated = field<std::vector<std::string>>(j, "attention_gated", file);
  o.lambda = field<double>(j, "lambda", file);
  o.target_heads = field<int64_t>(j, "target_heads", file);
  o.target_heads_per_type = optional_field<std::vector<int64_t>>(j, "target_heads_per_type", file)
                                .value_or(std::vector<int64_t>{});
  o.steps = field<int64_t>(j, "steps", file);
  o.budget = optional_field<nlohmann::ordered_json>(j, "budget", file);
  o.heads_before = field<std::string>(j, "heads_before_e_d_de", file);
  o.heads_after = field<std::string>(j, "heads_after_e_d_de", file);
  o.architecture_after = model::Architecture::from_json(
      nlohmann::json(field<nlohmann::ordered_json>(j, "heads_after", file)));
  o.heads_open_by_gates = optional_field<int64_t>(j, "heads_open_by_gates", file);
  o.parameters_before = field<int64_t>(j, "parameters_before", file);
  o.parameters_after = field<int64_t>(j, "parameters_after", file);
  HC_CHECK(o.parameters_after >= 0 && o.parameters_after <= o.parameters_before,
           "{}: parameters_after is {}, expected between 0 and parameters_before ({})", file,
           o.parameters_after, o.parameters_before);
  o.decode_flops_fraction = optional_field<double>(j, "decode_flops_fraction", file);
  o.dev_bleu_start = field<double>(j, "dev_bleu_start", file);
  o.dev_bleu_end = field<double>(j, "dev_bleu_end", file);
  for (const double b : {o.dev_bleu_start, o.dev_bleu_end})
    HC_CHECK(b >= 0 && b <= 100, "{}: a dev BLEU of {}, expected 0 to 100", file, b);
  if (j.contains("calibration_sentences")) o.fisher = read_fisher_details(j, file);
  o.pruned_checkpoint = field<std::string>(j, "pruned_checkpoint", file);
  return o;
}

std::string prune_readme(const PruneOutcome& outcome, const std::string& head_removal) {
  const std::string head = outcome.fisher ? fisher_readme(outcome) : l0_readme(outcome);
  return head + text::first_lines(head_removal, 25) + "```\n";
}

void write_prune_outcome(const run::RunFolder& folder, const PruneOutcome& outcome,
                         const std::string& head_removal) {
  io::write_file_atomic(folder.pruning(), outcome.to_json().dump(2) + "\n");
  io::write_file_atomic(folder.readme(), prune_readme(outcome, head_removal));
}

PruneOutcome read_prune_outcome(const fs::path& run_dir) {
  const fs::path file = run::RunFolder{run_dir}.pruning();
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(io::read_file(file));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: not JSON ({})", file.string(), e.what());
  }
  return PruneOutcome::from_json(j, file.string());
}

}  // namespace headcount::prune
