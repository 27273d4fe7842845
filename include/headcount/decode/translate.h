// The one translate-and-score path: subword ids in, search, text out, scored against references
// when given. `headcount translate`, `headcount eval` and `bench decode` run through it, and so can
// every other caller that decodes a dev or test set (the trainer's evaluation, the analyses).
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/common/precision.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/eval/record.h"
#include "headcount/model/transformer.h"
#include "headcount/run/checkpoint.h"

namespace headcount::decode {

struct Translation {
  std::vector<std::vector<int64_t>> ids;      // output ids without BOS and EOS, in input order
  std::vector<std::string> text;              // ids detokenised
  double seconds = 0;                         // see the function that filled it
  std::vector<eval::ReferenceScores> scores;  // empty without references
};

// The target-side text of output ids.
std::vector<std::string> to_text(const data::Vocab& tgt,
                                 const std::vector<std::vector<int64_t>>& ids);

// Translates `sources` (subword ids without EOS) and, given references (line-aligned streams),
// scores the text with eval::score_references. `seconds`: the search alone (translate_ids).
Translation translate_and_score(model::Transformer& model, const data::Vocab& tgt,
                                const std::vector<std::vector<int>>& sources,
                                const SearchOptions& options, int batch_size,
                                const torch::Device& device,
                                const std::vector<std::vector<std::string>>& references = {});

// A checkpoint loaded for decoding with its config's decode.*, threads.* and device settings.
struct Translator {
  run::CheckpointInfo info;
  model::Transformer model{nullptr};
  std::unique_ptr<data::Vocab> src, tgt;
  torch::Device device{torch::kCPU};
  SearchOptions search;
  int batch_size = 64;
  PrecisionChoice precision;  // decode.precision, resolved for this device
};

// Loads `checkpoint` with "KEY=VALUE" overrides and flags standing for decode.* keys applied over
// its config; applies its threads.* settings.
Translator load_translator(const std::string& checkpoint, const std::vector<std::string>& sets,
                           const std::vector<FlagOverride>& flags = {});

// Source lines as subword ids. `name` names the input in errors: a sentence longer than the
// position table is refused here, line by line, before any batch is padded to its length.
std::vector<std::vector<int>> encode_sources(const Translator& t,
                                             const std::vector<std::string>& lines,
                                             const std::string& name);

// translate_and_score on source lines; `seconds`: encoding, search and detokenising.
Translation translate_lines(Translator& t, const std::vector<std::string>& lines,
                            const std::string& name,
                            const std::vector<std::vector<std::string>>& references = {});

// What `headcount eval` translates and scores against.
struct EvalInputs {
  std::string data;         // the split, or the source file
  std::string source_name;  // names the source in errors
  std::vector<std::string> sources;
  std::vector<std::vector<std::string>> references;
  std::vector<std::string> ref_files;
};
// The dev or test split of the checkpoint's data config (`sets`: the overrides it was loaded
// with; data.prepare among them lets the corpus be prepared).
EvalInputs split_inputs(const Translator& t, const std::string& split,
                        const std::vector<std::string>& sets);
// A source file and its line-aligned reference files.
EvalInputs file_inputs(const std::string& src, const std::vector<std::string>& refs);

// The eval-SPLIT.json record of a scored translation of `in`.
eval::EvalRecord eval_record(const Translator& t, const std::string& checkpoint,
                             const EvalInputs& in, const Translation& tr,
                             const std::string& hyp_file);

}  // namespace headcount::decode
