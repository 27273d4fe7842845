// eval-SPLIT.json: what `headcount eval` records of one evaluation (a checkpoint translating a
// split or given files, scored with BLEU and chrF against each reference and all together), and
// what the sweep report reads back. One type, one writer, one reader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace headcount::eval {

// The scores against one set of references: "ref1", "ref2", ... each alone, then "all_refs".
// The scores are optional so that a record missing one reads back (the report skips it).
struct ReferenceScores {
  std::string name;
  std::optional<double> bleu;
  std::string bleu_signature;
  std::string bleu_verbose;  // "82.4/50.0/... (BP = ... ratio = ... hyp_len = ... ref_len = ...)"
  std::optional<double> chrf;
  std::string chrf_signature;
};

// BLEU and chrF (sacreBLEU's defaults) of `hyps` against each reference stream alone ("refN"),
// then, with several, against all together ("all_refs").
std::vector<ReferenceScores> score_references(
    const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& references);

struct EvalRecord {
  std::string checkpoint;
  std::string data;  // the split (dev, test) or the source file
  uint64_t sentences = 0;
  int beam = 0;
  double length_penalty = 0;
  // `eval --tune-length-penalty`: each GNMT alpha tried and its dev BLEU, in the order tried
  // (length_penalty is the choice); empty when the penalty was given.
  struct TunedPenalty {
    double length_penalty = 0;
    double dev_bleu = 0;
  };
  std::vector<TunedPenalty> length_penalty_tuning;
  std::string precision;  // fp32 | bf16: BLEU differs slightly between them
  std::string device;
  std::string heads_e_d_de;
  double decode_seconds = 0;
  double sentences_per_s = 0;
  std::string hyp_file;                // empty: the translations were not written
  std::vector<std::string> ref_files;  // recorded so that a paired test can find them later
  std::vector<ReferenceScores> scores;
  // Where it was decoded (provenance::record() of the evaluating process); null in records older
  // than the field.
  nlohmann::json provenance;

  // The scores named `name` ("ref1", "all_refs"), or nullptr.
  const ReferenceScores* score(const std::string& name) const;
};

// The JSON object, keys in the order `headcount eval` has always written them.
nlohmann::ordered_json to_json(const EvalRecord& r);
// Leniently, as older and hand-edited records are read: a missing or mistyped field keeps its
// default (a score: nullopt).
EvalRecord eval_record_from_json(const nlohmann::json& j);

// Writes to_json(r).dump(2) and a newline atomically.
void write_eval_record(const std::filesystem::path& path, const EvalRecord& r);
// nullopt when `path` does not exist; a file that is not JSON throws nlohmann's parse error.
std::optional<EvalRecord> read_eval_record(const std::filesystem::path& path);

}  // namespace headcount::eval
