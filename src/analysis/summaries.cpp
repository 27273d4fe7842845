#include "headcount/analysis/summaries.h"

#include <fmt/format.h>

namespace headcount::analysis {

namespace {

std::string signed3(const std::optional<double>& v) {
  return v ? fmt::format("{:+.3f}", *v) : std::string("-");
}

std::string spearman_line(const char* what, const SpearmanByType& s) {
  return fmt::format("  {:<25} {:<10} {:<10} {:<10} {:<10}\n", what, signed3(s.all),
                     signed3(s.by_type[0]), signed3(s.by_type[1]), signed3(s.by_type[2]));
}

const char* position(bool input) {
  return input ? "input" : "predict";
}

}  // namespace

std::string relevance_summary(const RelevanceRecord& r, const std::string& split, double epsilon) {
  std::string out =
      fmt::format("LRP head relevance over {} target tokens ({} {} sentences, eps {:g})\n",
                  r.target_tokens, r.sentences, split, epsilon);
  out += fmt::format(
      "  source share of the input relevance {:.3f}; top logit reaching the embeddings {:.3f}\n",
      r.source_share, r.reached_embeddings);
  out += fmt::format("  Spearman with relevance   {:<10} {:<10} {:<10} {:<10}\n", "all", "enc_self",
                     "dec_self", "enc_dec");
  out += spearman_line("confidence", r.vs_confidence);
  out += spearman_line("importance I_h", r.vs_importance);
  if (r.run) out += spearman_line("removal step", r.vs_removal_step);
  return out;
}

std::string align_summary(const AlignRecord& r) {
  std::string out = fmt::format("{} sentences scored ({} skipped), {} of {} target words linked\n",
                                r.sentences, r.skipped, r.linked_words, r.target_words);
  out += fmt::format("best baseline ({}): precision {:.3f} AER {:.3f}\n", r.baseline_name,
                     r.baseline.precision(), r.baseline.aer());
  if (r.best_head) {
    const auto &hb = *r.best_head, &lb = *r.best_layer;
    out += fmt::format("best head  {} ({}): precision {:.3f} AER {:.3f}\n", r.best_head_label,
                       position(hb.input), hb.counts.precision(), hb.counts.aer());
    out += fmt::format("best layer {} ({}, mean of its heads): precision {:.3f} AER {:.3f}\n",
                       lb.index, position(lb.input), lb.counts.precision(), lb.counts.aer());
  }
  out += "layer  precision(predict)  precision(input)  AER(predict)  AER(input)\n";
  for (const auto& l : r.layers)
    out += fmt::format("{:5}  {:18.3f}  {:16.3f}  {:12.3f}  {:10.3f}\n", l.layer,
                       l.predict.precision(), l.input.precision(), l.predict.aer(), l.input.aer());
  out +=
      fmt::format("{} heads align (precision >= baseline + {:.2f})\n", r.aligning_heads, r.margin);
  if (r.kept) {
    const auto& k = *r.kept;
    out += fmt::format(
        "kept by L0: {} of {} aligning heads ({} of {} gated kept); Spearman precision vs removal "
        "step {}\n",
        k.kept_aligning, k.kept_aligning + k.removed_aligning, k.kept, k.kept + k.removed,
        signed3(k.spearman));
  }
  return out;
}

std::string sentence_count(int sentences) {
  return sentences == 0 ? std::string("all") : std::to_string(sentences);
}

std::string compare_summary(const CompareResult& r, const std::string& run, int sentences,
                            const std::string& split, int beam, const std::string& written) {
  const bool fisher = r.method == PruneMethod::kFisher;
  const std::string name = fisher ? "Fisher" : "L0";
  const auto line = [](const std::string& what, double bleu) {
    return fmt::format("  {:<45}{:6.2f}\n", what, bleu);
  };
  std::string out =
      fmt::format("{} of {} gated heads removed by {} ({})\n", r.removed, r.gated, name, run);
  out += fmt::format("BLEU, {} {} sentences, beam {}:\n", sentence_count(sentences), split, beam);
  out += line("full model", r.bleu_full);
  out += line(name + "'s removed heads masked (no fine-tuning)", r.bleu_l0_masked);
  out += line("Michel: as many least-I_h heads masked", r.bleu_michel_masked);
  if (r.bleu_l0_tuned)
    out += line(name + (fisher ? " pruned checkpoint (its pruned/ model)"
                               : " pruned checkpoint (after fine-tuning)"),
                *r.bleu_l0_tuned);
  if (r.bleu_michel_tuned)
    out += line("Michel pruned, fine-tuned (same budget)", *r.bleu_michel_tuned);
  out += fmt::format("Spearman vs removal step: importance {:.3f}, confidence {:.3f}\nwrote {}\n",
                     r.spearman_importance, r.spearman_confidence, written);
  return out;
}

}  // namespace headcount::analysis
