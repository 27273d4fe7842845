#include "headcount/analysis/compare.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "headcount/analysis/head_stats.h"
#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/process.h"
#include "headcount/common/run_guard.h"
#include "headcount/prune/export.h"
#include "headcount/run/run_folder.h"

namespace headcount::analysis {

CompareResult compare_l0_with_importance(const AnalyzeOptions& options, const CompareOptions& c) {
  Analyzer an(options);
  const fs::path& out = c.out;
  const fs::path& run = c.run;
  fs::create_directories(out);
  const auto& heads = an.heads();
  // The run's removal steps (gated heads only; kept heads come last in the order).
  const auto order_ = read_removal_order(run, heads, options.checkpoint.string());
  const auto& gated = order_.gated;
  const auto& removal = order_.step;
  const auto& removed = order_.removed;
  const double last = order_.last;
  // The run's method from its config (a hand-written removal log without one: L0's).
  std::error_code ec;
  const fs::path run_config = run::RunFolder{run}.config();
  const PruneMethod method =
      fs::exists(run_config, ec) ? load_config_file(run_config).prune.method : PruneMethod::kL0;
  const auto score = an.importance(c.normalize);
  const auto stats = an.head_stats();
  // Michel: within each gated type, mask the least important heads, as many as the run removed.
  std::map<int, std::vector<size_t>> by_type;
  std::map<int, size_t> removed_per_type;
  for (size_t g : gated) by_type[static_cast<int>(heads[g].type)].push_back(g);
  for (const auto& h : removed) ++removed_per_type[static_cast<int>(h.type)];
  std::vector<HeadId> michel;
  for (auto& [t, members] : by_type) {
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t x, size_t y) { return score[x] < score[y]; });
    for (size_t k = 0; k < removed_per_type[t]; ++k) michel.push_back(heads[members[k]]);
  }
  const double full = an.bleu({});
  const double l0_masked = an.bleu(removed);
  const double michel_masked = an.bleu(michel);
  AnalyzeOptions po = options;
  po.checkpoint = run::RunFolder{run}.pruned();
  std::optional<double> l0_tuned;
  if (fs::exists(po.checkpoint / "model.pt")) l0_tuned = Analyzer(po).bleu({});
  std::optional<double> michel_tuned;
  const fs::path michel_ckpt = out / "michel-pruned", michel_run = out / "michel-finetuned";
  if (c.finetune || c.export_michel) {
    // Michel's heads removed physically (unless a fine-tuning of them is already under way).
    if (!fs::exists(run::RunFolder{michel_run}.last(), ec)) {
      fs::remove_all(michel_ckpt, ec);
      const auto arch = prune::export_without_heads(options.checkpoint, michel, michel_ckpt);
      log::info("wrote {}: heads {} (enc/dec/enc-dec)", michel_ckpt.string(), arch.summary());
    }
  }
  if (c.finetune) {
    // The prune run's own config: the same steps, learning rate and batches as its L0
    // fine-tuning, without gates.
    log::info("fine-tuning {} with {}'s budget (log: {})", michel_ckpt.string(), run.string(),
              (out / "michel-finetune.log").string());
    std::vector<std::string> args{"train",       run::RunFolder{run}.config().string(),
                                  "--init-from", michel_ckpt.string(),
                                  "--out",       michel_run.string()};
    if (c.finetune_threads > 0)
      args.insert(args.end(), {"--set", "threads.intra_op=-1", "--set",
                               fmt::format("threads.blas={}", c.finetune_threads)});
    process::ChildOptions child;
    child.argv = {c.executable.string()};
    child.argv.insert(child.argv.end(), args.begin(), args.end());
    child.output_file = out / "michel-finetune.log";
    child.stdin_null = true;
    const int rc = process::run(child);
    HC_CHECK(rc == 0, "the fine-tuning of {} failed (exit {}); see {}", michel_ckpt.string(), rc,
             (out / "michel-finetune.log").string());
    po.checkpoint = run::RunFolder{michel_run}.last();
    michel_tuned = Analyzer(po).bleu({});
  }
  // Rank agreement: importance and confidence against the removal step (later = kept longer).
  std::vector<double> imp_g, conf_g;
  for (size_t g : gated) imp_g.push_back(score[g]), conf_g.push_back(stats[g].confidence());
  const double rho_imp = spearman(imp_g, removal), rho_conf = spearman(conf_g, removal);
  // The five heads I_h ranks highest: their removal steps.
  std::vector<size_t> order(gated.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return imp_g[x] > imp_g[y]; });
  nlohmann::ordered_json top = nlohmann::ordered_json::array();
  for (size_t k = 0; k < std::min<size_t>(5, order.size()); ++k) {
    const size_t g = gated[order[k]];
    top.push_back(
        {{"head", heads[g].label()},
         {"importance", score[g]},
         {"removal_step", removal[order[k]] > last ? nlohmann::ordered_json(nullptr)
                                                   : nlohmann::ordered_json(removal[order[k]])}});
  }
  nlohmann::ordered_json j;
  j["checkpoint"] = options.checkpoint.string();
  j["run"] = run.string();
  j["method"] = choice_name(method);
  j["sentences"] = options.sentences;
  j["gated_heads"] = gated.size();
  j["removed_heads"] = removed.size();
  j["bleu_full"] = full;
  j["bleu_l0_heads_masked_no_finetuning"] = l0_masked;
  j["bleu_michel_same_counts_masked_no_finetuning"] = michel_masked;
  j["bleu_l0_pruned_checkpoint_finetuned"] = l0_tuned ? nlohmann::ordered_json(*l0_tuned) : nullptr;
  j["bleu_michel_pruned_finetuned_same_budget"] =
      michel_tuned ? nlohmann::ordered_json(*michel_tuned) : nullptr;
  nlohmann::ordered_json mh = nlohmann::ordered_json::array();
  for (const auto& h : michel) mh.push_back(h.label());
  j["michel_removed_heads"] = mh;
  j["spearman_importance_vs_removal_step"] = rho_imp;
  j["spearman_confidence_vs_removal_step"] = rho_conf;
  j["top_importance_heads"] = top;
  io::write_file_atomic(run::RunFolder{out}.compare(), j.dump(2) + "\n");
  CompareResult r;
  r.method = method;
  r.gated = gated.size();
  r.removed = removed.size();
  r.bleu_full = full;
  r.bleu_l0_masked = l0_masked;
  r.bleu_michel_masked = michel_masked;
  r.bleu_l0_tuned = l0_tuned;
  r.bleu_michel_tuned = michel_tuned;
  r.michel_removed = michel;
  r.spearman_importance = rho_imp;
  r.spearman_confidence = rho_conf;
  r.json = j;
  return r;
}

}  // namespace headcount::analysis
