#include "headcount/bench/report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace headcount::bench {

std::string gated_summary(const TrainBenchResult& r, int steps) {
  const double plain = r.median(), gated_median = r.gated_median();
  return fmt::format(
      "plain step: median {:.3f} s; gated step: median {:.3f} s (min {:.3f}, max {:.3f}); gated / "
      "plain = {:.3f} ({} alternating pairs)\n",
      plain, gated_median, r.gated_times.front(), r.gated_times.back(), gated_median / plain,
      steps);
}

std::string train_json(const TrainBenchResult& r) {
  const double median = r.median(), achieved = r.achieved_gflops();
  nlohmann::ordered_json j = {{"impl", "headcount"},
                              {"device", r.device.str()},
                              {"precision", r.precision.name()},
                              {"tokens_per_step", r.tokens_per_step},
                              {"step_seconds_median", median},
                              {"step_seconds_min", r.times.front()},
                              {"step_seconds_max", r.times.back()},
                              {"target_tokens_per_s", r.tokens_per_step / median},
                              {"gflop_per_step", r.flops_per_step / 1e9},
                              {"achieved_gflops", achieved},
                              {"matmul_peak_gflops", r.matmul_peak_gflops},
                              {"matmul_peak_size", r.matmul_peak_size},
                              {"fraction_of_peak", achieved / r.matmul_peak_gflops},
                              {"intra_op_threads", r.intra_op_threads},
                              {"page_faults_per_step", r.faults_per_step}};
  if (r.device.is_cuda()) j["tf32"] = r.tf32;
  return j.dump() + "\n";
}

std::string train_text(const TrainBenchOptions& a, const TrainBenchResult& r) {
  const double median = r.median(), achieved = r.achieved_gflops();
  std::string out = fmt::format(
      "headcount Transformer d={} ffn={} {}+{} layers {} heads vocab {}, {} x {} target tokens\n",
      a.d_model, a.ffn, a.layers, a.layers, a.heads, a.vocab, a.sentences, a.length);
  out += fmt::format("device: {}\n", r.device.str());
  out += fmt::format("precision: {} ({}){}; {} LibTorch threads\n", r.precision.name(),
                     r.precision.reason, r.tf32 ? ", TF32 products" : "", r.intra_op_threads);
  out += fmt::format("step time: median {:.3f} s (min {:.3f}, max {:.3f}) over {} steps\n", median,
                     r.times.front(), r.times.back(), a.steps);
  out += fmt::format("target tokens/s: {:.0f}\n", r.tokens_per_step / median);
  out += fmt::format("page faults per step: {:.0f}{}\n", r.faults_per_step,
                     a.gated ? " (plain and gated steps together)" : "");
  out += fmt::format(
      "FLOPs per step: {:.1f} GFLOP -> {:.1f} GFLOP/s; {} matmul peak measured now on {} ({}^3): "
      "{:.1f} GFLOP/s; fraction of peak: {:.0f}%\n",
      r.flops_per_step / 1e9, achieved, r.precision.name(), r.device.str(), r.matmul_peak_size,
      r.matmul_peak_gflops, 100.0 * achieved / r.matmul_peak_gflops);
  return out;
}

std::string decode_setup_text(const DecodeBench& b) {
  std::string out =
      fmt::format("{} dev sentences, batch {}, {} repeats (alternating), device {}\n", b.ids.size(),
                  b.info.config.decode.batch_size, b.options.repeats, b.device.str());
  for (size_t k = 0; k < b.choices.size(); ++k) {
    const auto& ch = b.choices[k];
    out += fmt::format("precision {}: {}; {} intra-op threads\n", ch.name(), ch.reason,
                       b.intra_op_threads[k]);
  }
  return out;
}

std::string decode_beam_table(int beam, const std::vector<DecodeRowResult>& rows) {
  std::string out = fmt::format(
      "\nbeam {}\n{:<27} {:<10} {:>12} {:>16} {:>10} {:>10} {:>8} {:>8}\n", beam, "model", "heads",
      "sentences/s", "(min-max)", "measured", "predicted", "ratio", "BLEU");
  for (const auto& r : rows) {
    out +=
        fmt::format("{:<27} {:<10} {:12.1f} {:7.1f}-{:<8.1f} {:9.2f}x {:9.2f}x {:8.2f} {:8.2f}\n",
                    r.name, r.heads, r.sentences_per_s, r.slowest, r.fastest, r.measured,
                    r.predicted, r.measured / r.predicted, r.bleu);
  }
  return out;
}

}  // namespace headcount::bench
