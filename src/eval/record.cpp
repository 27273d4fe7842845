#include "headcount/eval/record.h"

#include <fmt/format.h>

#include "headcount/common/io.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"

namespace headcount::eval {

std::vector<ReferenceScores> score_references(
    const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& references) {
  // Each reference alone, then all together.
  std::vector<std::vector<std::vector<std::string>>> sets;
  for (const auto& r : references) sets.push_back({r});
  if (references.size() > 1) sets.push_back(references);
  std::vector<ReferenceScores> out;
  for (size_t k = 0; k < sets.size(); ++k) {
    const Bleu bleu;
    const Chrf chrf;
    const auto b = bleu.corpus_score(hyps, sets[k]);
    const auto c = chrf.corpus_score(hyps, sets[k]);
    ReferenceScores s;
    s.name = k < references.size() ? fmt::format("ref{}", k + 1) : "all_refs";
    s.bleu = b.score;
    s.bleu_signature = bleu.signature(bleu.last_nrefs());
    s.bleu_verbose = b.verbose();
    s.chrf = c.score;
    s.chrf_signature = chrf.signature(chrf.last_nrefs());
    out.push_back(std::move(s));
  }
  return out;
}

const ReferenceScores* EvalRecord::score(const std::string& name) const {
  for (const auto& s : scores)
    if (s.name == name) return &s;
  return nullptr;
}

nlohmann::ordered_json to_json(const EvalRecord& r) {
  nlohmann::ordered_json j;
  j["checkpoint"] = r.checkpoint;
  j["data"] = r.data;
  j["sentences"] = r.sentences;
  j["beam"] = r.beam;
  j["length_penalty"] = r.length_penalty;
  for (const auto& t : r.length_penalty_tuning)
    j["length_penalty_tuning"].push_back(
        nlohmann::ordered_json{{"length_penalty", t.length_penalty}, {"dev_bleu", t.dev_bleu}});
  j["precision"] = r.precision;
  j["device"] = r.device;
  j["heads_e_d_de"] = r.heads_e_d_de;
  j["decode_seconds"] = r.decode_seconds;
  j["sentences_per_s"] = r.sentences_per_s;
  if (!r.hyp_file.empty()) j["hyp_file"] = r.hyp_file;
  j["ref_files"] = r.ref_files;
  if (!r.provenance.is_null()) j["provenance"] = r.provenance;
  for (const auto& s : r.scores) {
    nlohmann::ordered_json e;
    if (s.bleu) e["bleu"] = *s.bleu;
    e["bleu_signature"] = s.bleu_signature;
    e["bleu_verbose"] = s.bleu_verbose;
    if (s.chrf) e["chrf"] = *s.chrf;
    e["chrf_signature"] = s.chrf_signature;
    j["scores"][s.name] = e;
  }
  return j;
}

namespace {

template <typename T>
void read_field(const nlohmann::json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    // mistyped: the default stands
  }
}

std::optional<double> read_number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

ReferenceScores scores_from_json(const std::string& name, const nlohmann::json& j) {
  ReferenceScores s;
  s.name = name;
  if (!j.is_object()) return s;
  s.bleu = read_number(j, "bleu");
  read_field(j, "bleu_signature", s.bleu_signature);
  read_field(j, "bleu_verbose", s.bleu_verbose);
  s.chrf = read_number(j, "chrf");
  read_field(j, "chrf_signature", s.chrf_signature);
  return s;
}

}  // namespace

EvalRecord eval_record_from_json(const nlohmann::json& j) {
  EvalRecord r;
  if (!j.is_object()) return r;
  read_field(j, "checkpoint", r.checkpoint);
  read_field(j, "data", r.data);
  read_field(j, "sentences", r.sentences);
  read_field(j, "beam", r.beam);
  read_field(j, "length_penalty", r.length_penalty);
  if (const auto it = j.find("length_penalty_tuning"); it != j.end() && it->is_array()) {
    for (const auto& t : *it) {
      if (!t.is_object()) continue;
      const auto alpha = read_number(t, "length_penalty"), bleu = read_number(t, "dev_bleu");
      if (alpha && bleu) r.length_penalty_tuning.push_back({*alpha, *bleu});
    }
  }
  read_field(j, "precision", r.precision);
  if (j.contains("provenance") && j["provenance"].is_object()) r.provenance = j["provenance"];
  read_field(j, "device", r.device);
  read_field(j, "heads_e_d_de", r.heads_e_d_de);
  read_field(j, "decode_seconds", r.decode_seconds);
  read_field(j, "sentences_per_s", r.sentences_per_s);
  read_field(j, "hyp_file", r.hyp_file);
  if (const auto it = j.find("ref_files"); it != j.end() && it->is_array()) {
    // Up to the first entry that is not a path, as the report has always taken ref_files[0].
    for (const auto& f : *it) {
      if (!f.is_string()) break;
      r.ref_files.push_back(f.get<std::string>());
    }
  }
  if (const auto it = j.find("scores"); it != j.end() && it->is_object()) {
    // nlohmann::json sorts keys: the order written (ref1.., all_refs) is kept by name only.
    for (const auto& [name, s] : it->items()) r.scores.push_back(scores_from_json(name, s));
  }
  return r;
}

void write_eval_record(const std::filesystem::path& path, const EvalRecord& r) {
  io::write_file_atomic(path, to_json(r).dump(2) + "\n");
}

std::optional<EvalRecord> read_eval_record(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  return eval_record_from_json(nlohmann::json::parse(io::read_file(path)));
}

}  // namespace headcount::eval
