// headcount analyze: head importance (Michel et al.), ablations, what heads do (Voita et al.,
// Clark et al.), head similarity. The analyses and their files live in src/analysis; this file
// parses the arguments, calls them and prints.
#include <cstdint>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "headcount/analysis/align_report.h"
#include "headcount/analysis/analyzer.h"
#include "headcount/analysis/compare.h"
#include "headcount/analysis/heads_report.h"
#include "headcount/analysis/importance_report.h"
#include "headcount/analysis/relevance_report.h"
#include "headcount/analysis/summaries.h"
#include "headcount/common/check.h"
#include "headcount/common/log.h"
#include "headcount/run/run_folder.h"

namespace headcount::cli {
namespace {

struct AnalyzeArgs {
  analysis::AnalyzeOptions options;
  std::string out;
  bool normalize = false;
  std::string unit = "token";  // importance: where the absolute value is taken
  bool skip_curve = false;     // importance: importance.csv only
  std::string conllu;          // heads: dependency parses of the split's source sentences
  analysis::SyntaxCriteria syntax;
  double epsilon = 0.01;                         // relevance
  std::string run;                               // relevance, align, compare: a prune run
  std::string target = "kjv", links;             // align
  double align_margin = 0.10;                    // align
  bool finetune = false, export_michel = false;  // compare
  int finetune_threads = 0;                      // compare
};

void add_common(CLI::App* cmd, AnalyzeArgs& a) {
  cmd->add_option("--checkpoint", a.options.checkpoint, "Checkpoint folder (full or pruned)")
      ->required()
      ->check(checkpoint_folder())
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--split", a.options.split, "dev or test of the checkpoint's corpus")
      ->check(CLI::IsMember({"dev", "test"}))
      ->capture_default_str();
  cmd->add_option("--sentences", a.options.sentences, "The first N sentences (0: all)")
      ->check(integer_in(0, INT32_MAX))
      ->capture_default_str();
  cmd->add_option("--out", a.out, "Folder for the CSV files and plots")
      ->required()
      ->check(output_folder());
  cmd->add_option("--set", a.options.sets,
                  "Override a config key of the checkpoint (threads.*, decode.*, device)")
      ->type_name("KEY=VALUE");
}

void add_beam(CLI::App* cmd, AnalyzeArgs& a) {
  cmd->add_option("--beam", a.options.beam, "Beam for BLEU (1: greedy)")
      ->check(fits_config_key("decode.beam"))
      ->capture_default_str();
}

void run_importance(const AnalyzeArgs& a) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto unit = analysis::importance_unit_from(a.unit);
  log::info("importance of {} heads over {} {} sentences (absolute value per {})",
            an.heads().size(), analysis::sentence_count(a.options.sentences), a.options.split,
            analysis::importance_unit_name(unit));
  const auto score = an.importance(a.normalize, unit);
  analysis::write_importance(out, an, score, a.normalize, unit);
  if (a.skip_curve) {
    std::printf("wrote %s/importance.csv and its plot\n", out.c_str());
    return;
  }
  analysis::write_pruning_curve(out, analysis::pruning_curve(an, score));
  std::printf("wrote %s/{importance.csv,pruning_curve.csv} and plots\n", out.c_str());
}

void run_ablate(const AnalyzeArgs& a) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto ablation = analysis::ablate_each_head(an);
  analysis::write_ablation(out, an, ablation);
  analysis::write_keep_one(out, analysis::keep_one_head(an, ablation.base), ablation.base);
  std::printf("base BLEU %.2f; wrote %s/{ablate.csv,keep_one.csv} and plots\n", ablation.base,
              out.c_str());
}

void run_heads(const AnalyzeArgs& a) {
  // Read the parses before the (slow) model work, so that a bad file fails at once.
  std::optional<std::vector<analysis::DepSentence>> parses;
  if (!a.conllu.empty()) {
    parses = analysis::read_conllu(a.conllu);
    HC_CHECK(!parses->empty(), "{}: no sentence in the CoNLL-U file", a.conllu);
  }
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  analysis::write_heads_report(out, an, analysis::heads_report(an, parses, a.syntax), a.syntax);
  std::printf("wrote %s/heads.csv%s and plots\n", out.c_str(),
              parses ? ", syntax.csv, syntax_baseline.csv" : "");
}

void run_cluster(const AnalyzeArgs& a) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  analysis::write_clusters(out, an.heads(), analysis::cluster_heads(an));
  std::printf("wrote %s/{js_*.csv,mds.csv} and plots\n", out.c_str());
}

// LRP head relevance (Voita et al. 2019 §4) beside confidence, I_h and (with a prune run) the
// removal order.
void run_relevance(const AnalyzeArgs& a) {
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto r = analysis::relevance_report(an, a.options, a.epsilon, a.run);
  analysis::write_relevance_report(out, an, r);
  std::fputs(analysis::relevance_summary(r.record, a.options.split, a.epsilon).c_str(), stdout);
  std::printf("wrote %s/{relevance.csv,relevance.json} and plots\n", out.c_str());
}

// Encoder-decoder heads as word aligners against gold links (for the default corpus, from the
// Strong's numbers of the SWORD modules), and whether L0 keeps the heads that align.
void run_align(const AnalyzeArgs& a) {
  const auto in = analysis::read_align_inputs(a.options, a.target, a.links);
  analysis::Analyzer an(a.options);
  const fs::path out = a.out;
  fs::create_directories(out);
  const auto r = analysis::align_report(an, a.options, in, a.run, a.align_margin);
  analysis::write_align_report(out, an, r);
  std::fputs(analysis::align_summary(r.record).c_str(), stdout);
  std::printf("wrote %s/{align.csv,align_layers.csv,align_baseline.csv,align.json} and plots\n",
              out.c_str());
}

// A prune run (L0 or Fisher) against Michel et al.'s importance pruning at equal head counts
// (analysis/compare.h); prints the comparison.
void run_compare(const AnalyzeArgs& a) {
  analysis::CompareOptions c;
  c.run = a.run;
  c.out = a.out;
  c.normalize = a.normalize;
  c.finetune = a.finetune;
  c.finetune_threads = a.finetune_threads;
  c.export_michel = a.export_michel;
  c.executable = self_executable();
  const auto r = analysis::compare_l0_with_importance(a.options, c);
  std::fputs(analysis::compare_summary(r, a.run, a.options.sentences, a.options.split,
                                       a.options.beam, run::RunFolder{c.out}.compare().string())
                 .c_str(),
             stdout);
}

// Each subcommand's arguments live as long as the parser: CLI11 writes them while parsing and
// the callback reads them.
AnalyzeArgs& new_args(CLI::App* cmd, const std::string& name, const std::string& description,
                      void (*run)(const AnalyzeArgs&), CLI::App** sub) {
  auto args = std::make_shared<AnalyzeArgs>();
  *sub = cmd->add_subcommand(name, description);
  add_common(*sub, *args);
  (*sub)->callback([args, run] { run(*args); });
  return *args;
}

void add_importance(CLI::App* cmd) {
  CLI::App* i = nullptr;
  auto& a = new_args(cmd, "importance",
                     "Michel et al.'s gradient importance I_h of every head, and the BLEU of "
                     "masking the least important 0-90% (all heads, and per attention type)",
                     run_importance, &i);
  i->add_flag("--normalize", a.normalize, "Divide each layer's scores by their L2 norm");
  i->add_option("--unit", a.unit,
                "Where |dL/dxi_h| is taken: token (I_h of METHODS.md), sentence (Michel et al.'s "
                "per example) or split (none: the signed mean gradient an L0 gate follows, "
                "positive where the head lowers the loss)")
      ->check(CLI::IsMember({"token", "sentence", "split"}))
      ->capture_default_str();
  i->add_flag("--skip-curve", a.skip_curve,
              "Write importance.csv only, without the pruning curve's decoding");
  add_beam(i, a);
}

void add_ablate(CLI::App* cmd) {
  CLI::App* b = nullptr;
  auto& a = new_args(cmd, "ablate",
                     "BLEU change when each single head is masked, and the "
                     "best single head to keep in each layer",
                     run_ablate, &b);
  add_beam(b, a);
}

void add_heads(CLI::App* cmd) {
  CLI::App* h = nullptr;
  auto& a = new_args(cmd, "heads",
                     "Per head: confidence, entropy, attention to EOS and neighbours, positional, "
                     "rare-token and (with --conllu) syntactic functions",
                     run_heads, &h);
  h->add_option("--conllu", a.conllu,
                "Dependency parses (CoNLL-U) of the split's source sentences, in order: "
                "syntactic accuracy of the encoder self-attention heads")
      ->check(CLI::ExistingFile);
  h->add_option("--relations", a.syntax.relations,
                "Relations that make a head syntactic (UD names, subtypes folded)")
      ->delimiter(',')
      ->capture_default_str();
  h->add_option("--margin", a.syntax.margin,
                "A head is syntactic when its accuracy beats the best fixed offset by this much")
      ->check(number_in(-1, 1))  // a difference of two accuracies
      ->capture_default_str();
  h->add_option("--min-arcs", a.syntax.min_arcs, "Relations with fewer arcs are not judged")
      ->check(number_in(0, 1e9))
      ->capture_default_str();
  h->add_option("--exclude-top", a.options.exclude_top,
                "Rare-token heads: keys among the N most frequent never count as rare")
      ->check(integer_in(0, INT32_MAX))
      ->capture_default_str();
}

void add_cluster(CLI::App* cmd) {
  CLI::App* c = nullptr;
  new_args(cmd, "cluster",
           "Jensen-Shannon distances between heads and their 2-D classical MDS embedding",
           run_cluster, &c);
}

void add_relevance(CLI::App* cmd) {
  CLI::App* r = nullptr;
  auto& a = new_args(
      cmd, "relevance",
      "Layer-wise relevance propagation (epsilon rule): each head's share of its layer's "
      "relevance to the top-1 logit, against confidence, I_h and a prune run's removal order",
      run_relevance, &r);
  r->add_option("--epsilon", a.epsilon, "The epsilon rule's stabiliser")
      ->check(number_in(1e-12, 1e6))
      ->capture_default_str();
  r->add_option("--run", a.run,
                "A prune run started from --checkpoint: correlate with its removal order")
      ->check(CLI::ExistingDirectory);
}

void add_align(CLI::App* cmd) {
  CLI::App* g = nullptr;
  auto& a = new_args(
      cmd, "align",
      "Encoder-decoder heads as word aligners: force-decode a reference and score each head and "
      "layer against gold word links (precision, AER, fixed-offset baselines)",
      run_align, &g);
  g->add_option("--target", a.target,
                "The reference to force-decode: kjv (SPLIT.kjv.en with SPLIT.kjv.links) or web "
                "(the split's target with SPLIT.links), in the checkpoint's data folder")
      ->check(CLI::IsMember({"kjv", "web"}))
      ->capture_default_str();
  g->add_option("--links", a.links, "Gold links instead of the data folder's (S-T / S?T)")
      ->check(CLI::ExistingFile);
  g->add_option("--run", a.run, "A prune run started from --checkpoint: which aligners L0 kept")
      ->check(CLI::ExistingDirectory);
  g->add_option("--margin", a.align_margin,
                "A head aligns when its precision beats the best baseline by this much")
      ->check(number_in(-1, 1))  // a difference of two precisions
      ->capture_default_str();
}

void add_compare(CLI::App* cmd) {
  CLI::App* k = nullptr;
  auto& a = new_args(cmd, "compare",
                     "A prune run (L0 or Fisher) against Michel's importance pruning at equal head "
                     "counts, and where the heads I_h and confidence rank highest were removed",
                     run_compare, &k);
  k->add_option("--run", a.run, "The prune run (started from --checkpoint)")
      ->required()
      ->check(CLI::ExistingDirectory);
  k->add_flag("--normalize", a.normalize, "Layer-normalised I_h");
  add_beam(k, a);
  k->add_flag("--finetune", a.finetune,
              "Also fine-tune the Michel-pruned model (OUT/michel-pruned) with the prune run's "
              "config and budget (the steps that trained its exported weights: "
              "prune.recovery_steps after prune.rewind, train.max_steps otherwise), without "
              "gates (OUT/michel-finetuned; resumable)");
  k->add_option("--finetune-threads", a.finetune_threads,
                "BLAS threads of the fine-tuning (0: the prune run's config)")
      ->check(integer_in(0, 4096))
      ->capture_default_str();
  k->add_flag("--export-michel", a.export_michel,
              "Also write the Michel-pruned model, physically smaller and not fine-tuned "
              "(OUT/michel-pruned), for eval and bench decode");
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "analyze",
      "Head analyses of a checkpoint: importance, ablate, heads, relevance, align, compare, "
      "cluster");
  cmd->require_subcommand(1);
  add_importance(cmd);
  add_ablate(cmd);
  add_heads(cmd);
  add_cluster(cmd);
  add_relevance(cmd);
  add_align(cmd);
  add_compare(cmd);
}

}  // namespace headcount::cli
