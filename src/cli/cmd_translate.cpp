// headcount translate / eval: decode with a checkpoint; score a split or given files.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/precision.h"
#include "headcount/common/runtime.h"
#include "headcount/common/text.h"
#include "headcount/data/corpus.h"
#include "headcount/decode/search.h"
#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"
#include "headcount/run/checkpoint.h"

namespace headcount::cli {
namespace {

// The flags that stand for decode.* keys: applied over the checkpoint's config as --set is, so
// they take exactly the values the key takes.
struct DecodeFlag {
  const char* flag;
  const char* key;
  const char* help;
};
constexpr DecodeFlag kDecodeFlags[] = {
    {"--beam", "decode.beam", "Beam size (1: greedy); default decode.beam"},
    {"--length-penalty", "decode.length_penalty", "GNMT alpha; default decode.length_penalty"},
    {"--batch-size", "decode.batch_size", "Sentences decoded together; default decode.batch_size"},
};

struct DecodeArgs {
  std::string checkpoint;
  std::vector<std::string> sets;
  std::map<std::string, std::string> flag_values;  // flag -> its text, for the flags given
};

void add_decode_args(CLI::App* cmd, DecodeArgs& a) {
  cmd->add_option("--checkpoint", a.checkpoint, "Checkpoint folder (e.g. RUN/checkpoints/best)")
      ->required()
      ->check(checkpoint_folder());
  for (const auto& f : kDecodeFlags) {
    cmd->add_option(f.flag, a.flag_values[f.flag], f.help)->check(fits_config_key(f.key));
  }
  cmd->add_option("--set", a.sets,
                  "Override a config key of the checkpoint (decode.*, threads.*, device)")
      ->type_name("KEY=VALUE");
}

std::vector<FlagOverride> decode_flags(const DecodeArgs& a) {
  std::vector<FlagOverride> out;
  for (const auto& f : kDecodeFlags) {
    const auto it = a.flag_values.find(f.flag);
    if (it != a.flag_values.end() && !it->second.empty())
      out.push_back({f.flag, f.key, it->second});
  }
  return out;
}

struct Loaded {
  run::CheckpointInfo info;
  model::Transformer model{nullptr};
  std::unique_ptr<data::Vocab> src, tgt;
  torch::Device device{torch::kCPU};
  decode::SearchOptions search;
  int batch_size = 64;
  PrecisionChoice precision;  // decode.precision, resolved for this device
};

Loaded load(const DecodeArgs& a) {
  Loaded l;
  l.info = run::read_checkpoint_info(a.checkpoint);
  l.info.config =
      with_overrides(l.info.config, a.checkpoint + "/config.yaml", a.sets, decode_flags(a));
  const Config& c = l.info.config;
  l.device = runtime::resolve_device(c.device);
  l.precision = resolve_precision(c.decode.precision, l.device, "decode.precision");
  runtime::apply_threads(c.threads, l.precision.bf16());
  log::info("decoding in {} ({})", l.precision.name(), l.precision.reason);
  l.model = run::load_model(l.info, l.device);
  l.model->eval();
  l.src = std::make_unique<data::Vocab>(data::Vocab::load(l.info.vocab.src_model));
  l.tgt = std::make_unique<data::Vocab>(data::Vocab::load(l.info.vocab.tgt_model));
  l.search = decode::SearchOptions::from(c.decode);
  l.batch_size = c.decode.batch_size;
  return l;
}

// `name` names the input in errors: a sentence longer than the position table is refused here,
// line by line, before any batch is padded to its length.
std::vector<std::string> translate_lines(Loaded& l, const std::vector<std::string>& lines,
                                         const std::string& name) {
  const int positions = l.model->config().max_positions;
  std::vector<std::vector<int>> ids;
  for (size_t i = 0; i < lines.size(); ++i) {
    ids.push_back(l.src->encode(lines[i]));
    // The source and its end token take one position each.
    HC_CHECK(ids.back().size() + 1 <= static_cast<size_t>(positions),
             "{}:{}: {} subwords, but the model holds at most {} (model.max_positions {}, less "
             "the end token): shorten or split the line",
             name, i + 1, ids.back().size(), positions - 1, positions);
  }
  const auto out = decode::translate_ids(l.model, ids, l.search, l.batch_size, l.device);
  std::vector<std::string> text;
  for (const auto& o : out) text.push_back(l.tgt->decode(std::vector<int>(o.begin(), o.end())));
  return text;
}

}  // namespace

void add_translate_command(CLI::App& app) {
  auto a = std::make_shared<DecodeArgs>();
  auto input = std::make_shared<std::string>("-");
  auto output = std::make_shared<std::string>("-");
  auto* cmd = app.add_subcommand(
      "translate", "Translate source sentences (one a line) with a checkpoint, pruned or not");
  add_decode_args(cmd, *a);
  cmd->add_option("-i,--input", *input, "Source file ('-': stdin)")->capture_default_str();
  cmd->add_option("-o,--output", *output, "Output file ('-': stdout)")
      ->check(output_file())
      ->capture_default_str();
  cmd->callback([a, input, output] {
    Loaded l = load(*a);
    const auto lines = io::read_lines_or_stdin(*input, {.allow_empty_file = true});
    const auto out = translate_lines(l, lines, *input == "-" ? "<stdin>" : *input);
    if (*output == "-") {
      for (const auto& s : out) std::printf("%s\n", s.c_str());
    } else {
      io::write_lines_atomic(*output, out);
    }
  });
}

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<DecodeArgs>();
  auto split = std::make_shared<std::string>("test");
  auto src = std::make_shared<std::string>();
  auto refs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto hyp_out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "eval", "Translate a split (or given files) and score it with BLEU and chrF");
  add_decode_args(cmd, *a);
  cmd->add_option("--split", *split, "dev or test (the checkpoint's data config)")
      ->check(CLI::IsMember({"dev", "test"}))
      ->capture_default_str();
  cmd->add_option("--src", *src, "Source file instead of a split")->check(CLI::ExistingFile);
  cmd->add_option("--ref", *refs, "Reference file(s) for --src")->check(CLI::ExistingFile);
  cmd->add_option("--out", *out, "Write the result as JSON here")->check(output_file());
  cmd->add_option("--hyp-out", *hyp_out, "Write the translations here")->check(output_file());
  cmd->callback([a, split, src, refs, out, hyp_out] {
    Loaded l = load(*a);
    std::vector<std::string> sources;
    std::vector<std::vector<std::string>> references;
    std::string what, source_name;
    std::vector<std::string> ref_files;  // recorded so that a paired test can find them later
    if (!src->empty()) {
      HC_CHECK(!refs->empty(), "--src needs at least one --ref");
      sources = io::read_lines_or_stdin(*src);
      source_name = *src;
      ref_files = *refs;
      for (const auto& r : *refs) {
        references.push_back(io::read_lines_or_stdin(r, {.allow_empty_file = true}));
        HC_CHECK(references.back().size() == sources.size(),
                 "{} has {} lines but {} has {}: they must be line-aligned", r,
                 references.back().size(), *src, sources.size());
      }
      what = *src;
    } else {
      const auto& dc = l.info.config.data;
      const auto corpus = data::load_checkpoint_corpus(dc, overrides_key(a->sets, "data.prepare"));
      source_name = data_path(dc, *split == "dev" ? dc.dev_src : dc.test_src).string();
      if (*split == "dev") {
        sources = corpus.dev.src;
        references = {corpus.dev.tgt};
        ref_files = {data_path(dc, dc.dev_tgt).string()};
      } else {
        sources = corpus.test.src;
        references = corpus.test_refs;
        ref_files = {data_path(dc, dc.test_tgt).string()};
        for (const auto& extra : dc.test_extra_refs)
          ref_files.push_back(data_path(dc, extra).string());
      }
      what = *split;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto hyps = translate_lines(l, sources, source_name);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!hyp_out->empty()) io::write_lines_atomic(*hyp_out, hyps);
    nlohmann::ordered_json result;
    result["checkpoint"] = a->checkpoint;
    result["data"] = what;
    result["sentences"] = hyps.size();
    result["beam"] = l.search.beam;
    result["length_penalty"] = l.search.length_penalty;
    result["precision"] = l.precision.name();  // BLEU differs slightly between fp32 and bf16
    result["device"] = l.device.str();
    result["heads_e_d_de"] = l.info.architecture.summary();
    result["decode_seconds"] = seconds;
    result["sentences_per_s"] = seconds > 0 ? hyps.size() / seconds : 0.0;
    if (!hyp_out->empty()) result["hyp_file"] = *hyp_out;
    result["ref_files"] = ref_files;
    // Each reference alone, then all together.
    std::vector<std::vector<std::vector<std::string>>> sets;
    for (const auto& r : references) sets.push_back({r});
    if (references.size() > 1) sets.push_back(references);
    for (size_t k = 0; k < sets.size(); ++k) {
      const eval::Bleu bleu;
      const eval::Chrf chrf;
      const auto b = bleu.corpus_score(hyps, sets[k]);
      const auto c = chrf.corpus_score(hyps, sets[k]);
      const std::string name = k < references.size() ? fmt::format("ref{}", k + 1) : "all_refs";
      result["scores"][name] = {{"bleu", b.score},
                                {"bleu_signature", bleu.signature(bleu.last_nrefs())},
                                {"bleu_verbose", b.verbose()},
                                {"chrf", c.score},
                                {"chrf_signature", chrf.signature(chrf.last_nrefs())}};
      std::printf("%s %s: BLEU|%s = %.2f %s\n", what.c_str(), name.c_str(),
                  bleu.signature(bleu.last_nrefs()).c_str(), b.score, b.verbose().c_str());
      std::printf("%s %s: %s|%s = %.2f\n", what.c_str(), name.c_str(), chrf.name().c_str(),
                  chrf.signature(chrf.last_nrefs()).c_str(), c.score);
    }
    if (!out->empty()) io::write_file_atomic(*out, result.dump(2) + "\n");
  });
}

}  // namespace headcount::cli
