// headcount data: build the default corpus; check and describe parallel data.
#include <cstdio>

#include "commands.h"
#include "headcount/data/bible.h"
#include "headcount/data/corpus.h"

namespace headcount::cli {
namespace {

void print_stats(const Config& config) {
  const data::Corpus c = data::load_corpus(config.data);
  std::printf("corpus: %s (%s -> %s)\n", config.data.dir.c_str(), config.data.src_lang.c_str(),
              config.data.tgt_lang.c_str());
  std::printf("%-6s %8s %10s %10s %8s %8s %8s %8s\n", "split", "pairs", "src_words", "tgt_words",
              "src_mean", "tgt_mean", "src_max", "tgt_max");
  auto row = [](const char* name, const data::ParallelText& t) {
    const auto s = data::side_stats(t.src), g = data::side_stats(t.tgt);
    std::printf("%-6s %8zu %10zu %10zu %8.1f %8.1f %8zu %8zu\n", name, t.size(), s.tokens, g.tokens,
                s.mean(), g.mean(), s.max_tokens, g.max_tokens);
  };
  row("train", c.train);
  row("dev", c.dev);
  row("test", c.test);
  std::printf("test references: %zu\n", c.test_refs.size());
  std::printf("train length filter (tokens %d..%d, ratio <= %g): %s\n", config.data.min_tokens,
              config.data.max_tokens, config.data.max_length_ratio,
              c.train_filter.summary().c_str());
}

}  // namespace

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Build the default corpus; check and describe data");
  data->require_subcommand(1);

  auto out = std::make_shared<std::string>();
  auto period = std::make_shared<int>(30);
  auto* bible = data->add_subcommand(
      "bible",
      "Build the Spanish->English Bible corpus from Debian's SWORD modules (deterministic)");
  bible->add_option("--out", *out, "Output folder")->required()->check(output_folder());
  bible
      ->add_option("--period", *period,
                   "Hold out one chapter in N for dev and one in N for test (30: ~1,000 verses "
                   "each; 60: ~500 each and ~30,000 for training)")
      ->check(integer_in(3, 1000))
      ->capture_default_str();
  bible->callback([out, period] {
    data::BibleOptions o;
    o.out = *out;
    o.period = *period;
    o.dev_phase = *period / 3;
    o.test_phase = (5 * *period) / 6;
    const auto stats = data::build_bible_corpus(o);
    std::printf("verses in all three modules: %zu\n", stats.common);
    for (const auto& s : stats.splits) {
      std::printf("%-6s %6zu verses %5zu chapters %8zu es words %8zu en words\n", s.name.c_str(),
                  s.verses, s.chapters, s.src_words, s.tgt_words);
    }
    for (const auto& [name, l] : {std::pair<std::string, data::LinkStats>{"KJV", stats.ref2_links},
                                  {"WEB", stats.tgt_links}}) {
      std::printf(
          "gold links es->%s (dev+test): %.1f%% of %lld words linked (%.1f%% sure); "
          "%.1f%% of tagged words without a Spanish counterpart; tag purity %.3f\n",
          name.c_str(), 100 * l.coverage(), static_cast<long long>(l.words),
          100 * l.sure_coverage(), 100 * l.unmatched_share(), l.purity);
    }
    std::printf("written to %s (see corpus.json and README.md there)\n", out->c_str());
  });

  auto args = std::make_shared<ConfigArgs>();
  auto* stats = data->add_subcommand(
      "stats", "Validate the corpus a config describes and print its statistics");
  add_config_args(stats, *args);
  stats->callback([args] {
    Config config;
    if (!resolve_config(*args, &config)) return;
    print_stats(config);
  });
}

}  // namespace headcount::cli
