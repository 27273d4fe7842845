#include "headcount/analysis/compare.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "headcount/analysis/head_stats.h"
#include "headcount/analysis/head_table.h"
#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/process.h"
#include "headcount/common/run_guard.h"
#include "headcount/prune/export.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"

namespace headcount::analysis {

using ojson = nlohmann::ordered_json;

void write_compare_record(const fs::path& file, const CompareRecord& r) {
  ojson j;
  j["checkpoint"] = r.checkpoint;
  j["run"] = r.run;
  j["method"] = r.method;
  j["sentences"] = r.sentences;
  j["gated_heads"] = r.gated_heads;
  j["removed_heads"] = r.removed_heads;
  j["bleu_full"] = r.bleu_full;
  j["bleu_l0_heads_masked_no_finetuning"] = r.bleu_l0_masked;
  j["bleu_michel_same_counts_masked_no_finetuning"] = r.bleu_michel_masked;
  j["bleu_l0_pruned_checkpoint_finetuned"] = number_or_null(r.bleu_l0_tuned);
  j["bleu_michel_pruned_finetuned_same_budget"] = number_or_null(r.bleu_michel_tuned);
  j["michel_removed_heads"] = r.michel_removed_heads;
  j["spearman_importance_vs_removal_step"] = r.spearman_importance;
  j["spearman_confidence_vs_removal_step"] = r.spearman_confidence;
  ojson top = ojson::array();
  for (const auto& h : r.top_importance_heads)
    top.push_back({{"head", h.head},
                   {"importance", h.importance},
                   {"removal_step", number_or_null(h.removal_step)}});
  j["top_importance_heads"] = top;
  io::write_file_atomic(file, j.dump(2) + "\n");
}

CompareRecord read_compare_record(const fs::path& file) {
  const auto j = nlohmann::json::parse(io::read_file(file));
  const auto number = [&](const char* key) {
    return optional_number(j, key).value_or(std::nan(""));
  };
  CompareRecord r;
  r.checkpoint = j.value("checkpoint", "");
  r.run = j.value("run", "");
  r.method = j.value("method", "");
  r.sentences = j.value("sentences", 0);
  r.gated_heads = j.value("gated_heads", size_t{0});
  r.removed_heads = j.value("removed_heads", size_t{0});
  r.bleu_full = number("bleu_full");
  r.bleu_l0_masked = number("bleu_l0_heads_masked_no_finetuning");
  r.bleu_michel_masked = number("bleu_michel_same_counts_masked_no_finetuning");
  r.bleu_l0_tuned = optional_number(j, "bleu_l0_pruned_checkpoint_finetuned");
  r.bleu_michel_tuned = optional_number(j, "bleu_michel_pruned_finetuned_same_budget");
  r.michel_removed_heads = j.value("michel_removed_heads", std::vector<std::string>{});
  r.spearman_importance = number("spearman_importance_vs_removal_step");
  r.spearman_confidence = number("spearman_confidence_vs_removal_step");
  for (const auto& h : j.value("top_importance_heads", nlohmann::json::array()))
    r.top_importance_heads.push_back({h.value("head", ""),
                                      optional_number(h, "importance").value_or(std::nan("")),
                                      optional_number(h, "removal_step")});
  return r;
}

namespace {

// The run's method from its config (a hand-written removal log without one: L0's).
PruneMethod run_method(const fs::path& run) {
  std::error_code ec;
  const fs::path run_config = run::RunFolder{run}.config();
  return fs::exists(run_config, ec) ? load_config_file(run_config).prune.method : PruneMethod::kL0;
}

// Michel: within each gated type, the least important heads, as many as the run removed.
std::vector<HeadId> michel_heads(const std::vector<HeadId>& heads, const RemovalOrder& order,
                                 const std::vector<double>& score) {
  std::map<int, std::vector<size_t>> by_type;
  std::map<int, size_t> removed_per_type;
  for (size_t g : order.gated) by_type[static_cast<int>(heads[g].type)].push_back(g);
  for (const auto& h : order.removed) ++removed_per_type[static_cast<int>(h.type)];
  std::vector<HeadId> michel;
  for (auto& [t, members] : by_type) {
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t x, size_t y) { return score[x] < score[y]; });
    for (size_t k = 0; k < removed_per_type[t]; ++k) michel.push_back(heads[members[k]]);
  }
  return michel;
}

// Michel's heads removed physically (unless a fine-tuning of them is already under way).
void export_michel(const AnalyzeOptions& options, const std::vector<HeadId>& michel,
                   const fs::path& michel_ckpt, const fs::path& michel_run) {
  std::error_code ec;
  if (fs::exists(run::RunFolder{michel_run}.last(), ec)) return;
  fs::remove_all(michel_ckpt, ec);
  const auto arch = prune::export_without_heads(options.checkpoint, michel, michel_ckpt);
  log::info("wrote {}: heads {} (enc/dec/enc-dec)", michel_ckpt.string(), arch.summary());
}

// Fine-tunes Michel's pruned model with the prune run's own config: the same learning rate and
// batches as its L0 fine-tuning, without gates, for the steps that trained the run's exported
// weights (finetune_budget). Returns the BLEU of the result.
double finetune_michel(const AnalyzeOptions& options, const CompareOptions& c,
                       const fs::path& michel_ckpt, const fs::path& michel_run) {
  log::info("fine-tuning {} with {}'s budget (log: {})", michel_ckpt.string(), c.run.string(),
            (c.out / "michel-finetune.log").string());
  std::vector<std::string> args{"train",       run::RunFolder{c.run}.config().string(),
                                "--init-from", michel_ckpt.string(),
                                "--out",       michel_run.string()};
  const Config run_config = load_config_file(run::RunFolder{c.run}.config());
  const int64_t fixed_at = prune::mask_fixed_at(run::RunFolder{c.run}.last());
  const auto sets = finetune_sets(run_config, fixed_at);
  if (!sets.empty())
    log::info(
        "{} rewound its weights when it fixed its mask: Michel's model gets the {} steps "
        "that trained them",
        c.run.string(), finetune_budget(run_config, fixed_at));
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  if (c.finetune_threads > 0)
    args.insert(args.end(), {"--set", "threads.intra_op=-1", "--set",
                             fmt::format("threads.blas={}", c.finetune_threads)});
  process::ChildOptions child;
  child.argv = {c.executable.string()};
  child.argv.insert(child.argv.end(), args.begin(), args.end());
  child.output_file = c.out / "michel-finetune.log";
  child.stdin_null = true;
  const int rc = process::run(child);
  HC_CHECK(rc == 0, "the fine-tuning of {} failed (exit {}); see {}", michel_ckpt.string(), rc,
           (c.out / "michel-finetune.log").string());
  AnalyzeOptions po = options;
  po.checkpoint = run::RunFolder{michel_run}.last();
  return Analyzer(po).bleu({});
}

// The five heads I_h ranks highest (among the gated ones) and their removal steps.
std::vector<TopImportanceHead> top_importance(const std::vector<HeadId>& heads,
                                              const RemovalOrder& o,
                                              const std::vector<double>& imp_g) {
  std::vector<size_t> rank(o.gated.size());
  std::iota(rank.begin(), rank.end(), 0);
  std::stable_sort(rank.begin(), rank.end(),
                   [&](size_t x, size_t y) { return imp_g[x] > imp_g[y]; });
  std::vector<TopImportanceHead> top;
  for (size_t k = 0; k < std::min<size_t>(5, rank.size()); ++k) {
    const size_t g = o.gated[rank[k]];
    const double step = o.step[rank[k]];
    top.push_back({heads[g].label(), imp_g[rank[k]],
                   step > o.last ? std::nullopt : std::optional<double>(step)});
  }
  return top;
}

// Rank agreement of importance and confidence with the removal step (later = kept longer), and
// compare.json.
void rank_agreement(const std::vector<HeadId>& heads, const RemovalOrder& o,
                    const std::vector<double>& score, const std::vector<HeadStats>& stats,
                    CompareResult* r) {
  std::vector<double> imp_g, conf_g;
  for (size_t g : o.gated) imp_g.push_back(score[g]), conf_g.push_back(stats[g].confidence());
  r->spearman_importance = spearman(imp_g, o.step);
  r->spearman_confidence = spearman(conf_g, o.step);
  r->record.top_importance_heads = top_importance(heads, o, imp_g);
}

void fill_record(const AnalyzeOptions& options, const CompareOptions& c, CompareResult* r) {
  auto& j = r->record;
  j.checkpoint = options.checkpoint.string();
  j.run = c.run.string();
  j.method = choice_name(r->method);
  j.sentences = options.sentences;
  j.gated_heads = r->gated;
  j.removed_heads = r->removed;
  j.bleu_full = r->bleu_full;
  j.bleu_l0_masked = r->bleu_l0_masked;
  j.bleu_michel_masked = r->bleu_michel_masked;
  j.bleu_l0_tuned = r->bleu_l0_tuned;
  j.bleu_michel_tuned = r->bleu_michel_tuned;
  for (const auto& h : r->michel_removed) j.michel_removed_heads.push_back(h.label());
  j.spearman_importance = r->spearman_importance;
  j.spearman_confidence = r->spearman_confidence;
}

}  // namespace

int finetune_budget(const Config& run_config, int64_t mask_fixed_at) {
  const PruneConfig& p = run_config.prune;
  const int max_steps = run_config.train.max_steps;
  if (!p.rewind || p.recovery_steps <= 0) return max_steps;
  if (p.fix_at_target && !p.exact_recovery && mask_fixed_at >= 0 && mask_fixed_at < max_steps)
    return static_cast<int>(max_steps - mask_fixed_at);
  return p.recovery_steps;
}

std::vector<std::string> finetune_sets(const Config& run_config, int64_t mask_fixed_at) {
  const int steps = finetune_budget(run_config, mask_fixed_at);
  if (steps == run_config.train.max_steps) return {};
  // Michel's fine-tuning has no gates, so no gate runs either (and prune.gate_seeds would refuse
  // the recovery settings turned off here).
  return {fmt::format("train.max_steps={}", steps),
          "prune.recovery_steps=0",
          "prune.rewind=false",
          "prune.fix_at_target=false",
          "prune.exact_recovery=false",
          "prune.gate_seeds=[]"};
}

CompareResult compare_l0_with_importance(const AnalyzeOptions& options, const CompareOptions& c) {
  Analyzer an(options);
  fs::create_directories(c.out);
  const auto& heads = an.heads();
  // The run's removal steps (gated heads only; kept heads come last in the order).
  const auto order = read_removal_order(c.run, heads, options.checkpoint.string());
  CompareResult r;
  r.method = run_method(c.run);
  const auto score = an.importance(c.normalize);
  const auto stats = an.head_stats();
  r.michel_removed = michel_heads(heads, order, score);
  r.gated = order.gated.size();
  r.removed = order.removed.size();
  r.bleu_full = an.bleu({});
  r.bleu_l0_masked = an.bleu(order.removed);
  r.bleu_michel_masked = an.bleu(r.michel_removed);
  AnalyzeOptions po = options;
  po.checkpoint = run::RunFolder{c.run}.pruned();
  if (run::CheckpointFolder{po.checkpoint}.has_weights()) r.bleu_l0_tuned = Analyzer(po).bleu({});
  const fs::path michel_ckpt = c.out / "michel-pruned", michel_run = c.out / "michel-finetuned";
  if (c.finetune || c.export_michel)
    export_michel(options, r.michel_removed, michel_ckpt, michel_run);
  if (c.finetune) r.bleu_michel_tuned = finetune_michel(options, c, michel_ckpt, michel_run);
  rank_agreement(heads, order, score, stats, &r);
  fill_record(options, c, &r);
  write_compare_record(run::RunFolder{c.out}.compare(), r.record);
  return r;
}

}  // namespace headcount::analysis
