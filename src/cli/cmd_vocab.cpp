// headcount vocab: train (or reuse) the SentencePiece vocabulary of a config and describe it.
#include <cstdio>

#include "commands.h"
#include "headcount/common/runtime.h"
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"

namespace headcount::cli {
namespace {

struct SubwordStats {
  size_t sentences = 0, pieces = 0, unk = 0, round_trip_errors = 0;
};

SubwordStats measure(const data::Vocab& v, const std::vector<std::string>& lines) {
  SubwordStats s;
  for (const auto& l : lines) {
    const auto ids = v.encode(l);
    ++s.sentences;
    s.pieces += ids.size();
    for (int id : ids) s.unk += id == data::kUnkId;
    if (v.decode(ids) != l) ++s.round_trip_errors;
  }
  return s;
}

void run(const Config& config) {
  const data::Corpus c = data::load_corpus(config.data);
  const int threads = runtime::num_cores();  // SentencePiece's trainer, not LibTorch
  const auto files = data::train_or_load_vocab(
      config.vocab, data_path(config.data, config.data.train_src),
      data_path(config.data, config.data.train_tgt), config.seed, threads);
  const auto src = data::Vocab::load(files.src_model);
  const auto tgt = data::Vocab::load(files.tgt_model);
  std::printf("vocabulary: %s, %s %s, %d pieces%s\n", files.src_model.parent_path().c_str(),
              files.joint ? "joint" : "separate", config.vocab.model_type.c_str(), src.size(),
              files.from_cache ? " (cached)" : "");
  std::printf("%-10s %8s %10s %10s %8s %12s\n", "side", "lines", "subwords", "per_line", "unk",
              "round_trip");
  auto row = [](const char* name, const data::Vocab& v, const std::vector<std::string>& lines) {
    const auto s = measure(v, lines);
    std::printf(
        "%-10s %8zu %10zu %10.1f %8zu %12s\n", name, s.sentences, s.pieces,
        s.sentences ? static_cast<double>(s.pieces) / s.sentences : 0.0, s.unk,
        s.round_trip_errors == 0 ? "exact" : fmt::format("{} differ", s.round_trip_errors).c_str());
  };
  row("train.src", src, c.train.src);
  row("train.tgt", tgt, c.train.tgt);
  row("dev.src", src, c.dev.src);
  row("dev.tgt", tgt, c.dev.tgt);
}

}  // namespace

void add_vocab_command(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  auto* cmd = app.add_subcommand(
      "vocab", "Train (or reuse from the cache) the SentencePiece vocabulary of a config");
  add_config_args(cmd, *args);
  cmd->callback([args] {
    Config config;
    if (!resolve_config(*args, &config)) return;
    run(config);
  });
}

}  // namespace headcount::cli
