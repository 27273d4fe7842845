#include "headcount/decode/translate.h"

#include <chrono>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/provenance.h"
#include "headcount/common/runtime.h"
#include "headcount/data/corpus.h"
#include "headcount/run/checkpoint_files.h"

namespace headcount::decode {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<std::string> to_text(const data::Vocab& tgt,
                                 const std::vector<std::vector<int64_t>>& ids) {
  std::vector<std::string> text;
  for (const auto& o : ids) text.push_back(tgt.decode(std::vector<int>(o.begin(), o.end())));
  return text;
}

Translation translate_and_score(model::Transformer& model, const data::Vocab& tgt,
                                const std::vector<std::vector<int>>& sources,
                                const SearchOptions& options, int batch_size,
                                const torch::Device& device,
                                const std::vector<std::vector<std::string>>& references) {
  Translation tr;
  const auto t0 = std::chrono::steady_clock::now();
  tr.ids = translate_ids(model, sources, options, batch_size, device);
  tr.seconds = seconds_since(t0);
  tr.text = to_text(tgt, tr.ids);
  if (!references.empty()) tr.scores = eval::score_references(tr.text, references);
  return tr;
}

Translator load_translator(const std::string& checkpoint, const std::vector<std::string>& sets,
                           const std::vector<FlagOverride>& flags) {
  Translator t;
  t.info = run::read_checkpoint_info(checkpoint);
  run::require_ungated(checkpoint, "translating with it");
  t.info.config = with_overrides(t.info.config, checkpoint + "/config.yaml", sets, flags);
  const Config& c = t.info.config;
  t.device = runtime::resolve_device(c.device);
  t.precision = resolve_precision(c.decode.precision, t.device, "decode.precision");
  runtime::apply_threads(c.threads, t.precision.bf16());
  log::info("decoding in {} ({})", t.precision.name(), t.precision.reason);
  t.model = run::load_model(t.info, t.device);
  t.model->eval();
  t.src = std::make_unique<data::Vocab>(data::Vocab::load(t.info.vocab.src_model));
  t.tgt = std::make_unique<data::Vocab>(data::Vocab::load(t.info.vocab.tgt_model));
  t.search = SearchOptions::from(c.decode);
  t.batch_size = c.decode.batch_size;
  return t;
}

std::vector<std::vector<int>> encode_sources(const Translator& t,
                                             const std::vector<std::string>& lines,
                                             const std::string& name) {
  const int positions = t.model->config().max_positions;
  std::vector<std::vector<int>> ids;
  for (size_t i = 0; i < lines.size(); ++i) {
    ids.push_back(t.src->encode(lines[i]));
    // The source and its end token take one position each.
    HC_CHECK(ids.back().size() + 1 <= static_cast<size_t>(positions),
             "{}:{}: {} subwords, but the model holds at most {} (model.max_positions {}, less "
             "the end token): shorten or split the line",
             name, i + 1, ids.back().size(), positions - 1, positions);
  }
  return ids;
}

Translation translate_lines(Translator& t, const std::vector<std::string>& lines,
                            const std::string& name,
                            const std::vector<std::vector<std::string>>& references) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = encode_sources(t, lines, name);
  // Scored after the clock stops: the time is the translation's.
  Translation tr = translate_and_score(t.model, *t.tgt, ids, t.search, t.batch_size, t.device);
  tr.seconds = seconds_since(t0);
  if (!references.empty()) tr.scores = eval::score_references(tr.text, references);
  return tr;
}

EvalInputs split_inputs(const Translator& t, const std::string& split,
                        const std::vector<std::string>& sets) {
  EvalInputs in;
  const auto& dc = t.info.config.data;
  const auto corpus = data::load_checkpoint_corpus(dc, overrides_key(sets, "data.prepare"));
  in.source_name = data_path(dc, split == "dev" ? dc.dev_src : dc.test_src).string();
  if (split == "dev") {
    in.sources = corpus.dev.src;
    in.references = {corpus.dev.tgt};
    in.ref_files = {data_path(dc, dc.dev_tgt).string()};
  } else {
    in.sources = corpus.test.src;
    in.references = corpus.test_refs;
    in.ref_files = {data_path(dc, dc.test_tgt).string()};
    for (const auto& extra : dc.test_extra_refs)
      in.ref_files.push_back(data_path(dc, extra).string());
  }
  in.data = split;
  return in;
}

EvalInputs file_inputs(const std::string& src, const std::vector<std::string>& refs) {
  HC_CHECK(!refs.empty(), "--src needs at least one --ref");
  EvalInputs in;
  in.sources = io::read_lines_or_stdin(src);
  in.source_name = src;
  in.ref_files = refs;
  for (const auto& r : refs) {
    in.references.push_back(io::read_lines_or_stdin(r, {.allow_empty_file = true}));
    HC_CHECK(in.references.back().size() == in.sources.size(),
             "{} has {} lines but {} has {}: they must be line-aligned", r,
             in.references.back().size(), src, in.sources.size());
  }
  in.data = src;
  return in;
}

eval::EvalRecord eval_record(const Translator& t, const std::string& checkpoint,
                             const EvalInputs& in, const Translation& tr,
                             const std::string& hyp_file) {
  eval::EvalRecord r;
  r.checkpoint = checkpoint;
  r.data = in.data;
  r.sentences = tr.text.size();
  r.beam = t.search.beam;
  r.length_penalty = t.search.length_penalty;
  r.precision = t.precision.name();
  r.device = t.device.str();
  r.heads_e_d_de = t.info.architecture.summary();
  r.decode_seconds = tr.seconds;
  r.sentences_per_s = tr.seconds > 0 ? tr.text.size() / tr.seconds : 0.0;
  r.provenance = provenance::record();
  r.hyp_file = hyp_file;
  r.ref_files = in.ref_files;
  r.scores = tr.scores;
  return r;
}

}  // namespace headcount::decode
