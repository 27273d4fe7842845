// headcount bench: measured figures of this machine (BLAS speed, thread settings, training and
// decoding speed). The measurements are the library's (include/headcount/bench/); this file
// registers the options and prints.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "headcount/bench/decode.h"
#include "headcount/bench/threads.h"
#include "headcount/bench/timing.h"
#include "headcount/bench/train.h"
#include "headcount/common/precision.h"
#include "headcount/common/runtime.h"

namespace headcount::cli {
namespace {

void run_blas() {
  const auto b = runtime::probe_blas();
  std::printf("BLAS: %s\nlibrary: %s\n", b.vendor.c_str(), b.library.c_str());
  // OpenBLAS's configuration string above names its kernel set; say when the environment chose
  // it.
  if (const std::string note = runtime::blas_kernel_note(); !note.empty())
    std::printf("kernel set: %s\n", note.c_str());
  else if (const char* core = std::getenv("OPENBLAS_CORETYPE"))
    std::printf("kernel set chosen by OPENBLAS_CORETYPE=%s\n", core);
  std::printf("sgemm 384x384: %.1f GFLOP/s%s\n", b.gflops,
              b.slow ? "  (SLOW: install libopenblas0-pthread)" : "");
  // The peaks the training step is measured against (bench train's fraction of peak): fp32
  // through the BLAS on its own threads, bf16 through oneDNN on LibTorch's threads.
  const int cores = runtime::num_cores();
  at::set_num_threads(1);
  bench::set_blas_threads(cores);
  std::printf("fp32 matmul 2048^3: %.1f GFLOP/s (BLAS threads: %d)\n",
              bench::matmul_peak_gflops(false), cores);
  const std::string native = cpu_native_bf16();
  if (native.empty()) {
    std::printf(
        "bf16 matmul: no native bf16 arithmetic on this CPU (bf16 precision unavailable)\n");
    return;
  }
  for (int n : {1, cores}) {
    at::set_num_threads(n);
    std::printf("bf16 matmul 2048^3: %.1f GFLOP/s (oneDNN, %d thread%s; CPU has %s)\n",
                bench::matmul_peak_gflops(true), n, n == 1 ? "" : "s", native.c_str());
    if (cores == 1) break;
  }
}

void add_blas_bench(CLI::App* bench) {
  auto* blas = bench->add_subcommand("blas", "Identify the BLAS and measure its matmul speed");
  blas->callback([] { run_blas(); });
}

// Target tokens/s, median and spread, of each thread setting.
void run_threads(const bench::ThreadsOptions& a) {
  const auto r = bench::bench_threads(a, [](int repeat, const bench::ThreadSetting& s) {
    std::fprintf(stderr, "repeat %d intra_op=%d blas=%d: %.0f tokens/s\n", repeat, s.intra, s.blas,
                 s.rates.back());
  });
  std::printf("nn::Transformer d=%d %d+%d layers %d heads, %lld target tokens/step, %d cores\n",
              a.d_model, a.layers, a.layers, a.heads, static_cast<long long>(r.tokens_per_step),
              runtime::num_cores());
  std::printf("%-10s %-6s %14s %10s %10s\n", "intra_op", "blas", "median tok/s", "min", "max");
  for (const auto& s : r.settings) {
    auto v = s.rates;
    std::sort(v.begin(), v.end());
    std::printf("%-10d %-6d %14.0f %10.0f %10.0f\n", s.intra, s.blas, v[v.size() / 2], v.front(),
                v.back());
  }
}

void add_threads_bench(CLI::App* bench) {
  auto a = std::make_shared<bench::ThreadsOptions>();
  auto* threads = bench->add_subcommand(
      "threads", "Training-step speed under intra-op x BLAS thread settings (alternated)");
  // Model sizes take the ranges of the config keys they stand for.
  threads->add_option("--d-model", a->d_model)
      ->check(fits_config_key("model.d_model"))
      ->capture_default_str();
  threads->add_option("--layers", a->layers)
      ->check(fits_config_key("model.encoder_layers"))
      ->capture_default_str();
  threads->add_option("--heads", a->heads)
      ->check(fits_config_key("model.heads"))
      ->capture_default_str();
  threads->add_option("--tokens", a->tokens, "Target tokens per step")
      ->check(fits_config_key("train.max_tokens"))
      ->capture_default_str();
  threads->add_option("--repeats", a->repeats)->check(integer_in(1, 100))->capture_default_str();
  threads->callback([a] { run_threads(*a); });
}

struct TrainBenchArgs {
  bench::TrainBenchOptions options;
  bool json = false;
  ConfigArgs config;
};

// Plain against gated steps, timed alternately.
void print_gated_summary(const bench::TrainBenchResult& r, int steps) {
  const double plain = r.median(), gated_median = r.gated_median();
  std::printf(
      "plain step: median %.3f s; gated step: median %.3f s (min %.3f, max %.3f); gated / "
      "plain = %.3f (%d alternating pairs)\n",
      plain, gated_median, r.gated_times.front(), r.gated_times.back(), gated_median / plain,
      steps);
}

void print_train_json(const bench::TrainBenchResult& r) {
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
  std::printf("%s\n", j.dump().c_str());
}

// The timed steps' median against the FLOPs and the matmul peak measured on the device.
void print_train_text(const bench::TrainBenchOptions& a, const bench::TrainBenchResult& r) {
  const double median = r.median(), achieved = r.achieved_gflops();
  std::printf(
      "headcount Transformer d=%d ffn=%d %d+%d layers %d heads vocab %d, %d x %d target tokens\n",
      a.d_model, a.ffn, a.layers, a.layers, a.heads, a.vocab, a.sentences, a.length);
  std::printf("device: %s\n", r.device.str().c_str());
  std::printf("precision: %s (%s)%s; %d LibTorch threads\n", r.precision.name().c_str(),
              r.precision.reason.c_str(), r.tf32 ? ", TF32 products" : "", r.intra_op_threads);
  std::printf("step time: median %.3f s (min %.3f, max %.3f) over %d steps\n", median,
              r.times.front(), r.times.back(), a.steps);
  std::printf("target tokens/s: %.0f\n", r.tokens_per_step / median);
  std::printf("page faults per step: %.0f%s\n", r.faults_per_step,
              a.gated ? " (plain and gated steps together)" : "");
  std::printf(
      "FLOPs per step: %.1f GFLOP -> %.1f GFLOP/s; %s matmul peak measured now on %s (%lld^3): "
      "%.1f GFLOP/s; fraction of peak: %.0f%%\n",
      r.flops_per_step / 1e9, achieved, r.precision.name().c_str(), r.device.str().c_str(),
      static_cast<long long>(r.matmul_peak_size), r.matmul_peak_gflops,
      100.0 * achieved / r.matmul_peak_gflops);
}

void run_train(const TrainBenchArgs& a) {
  Config config;
  if (!resolve_config(a.config, &config)) return;
  const auto r = bench::bench_train(a.options, config);
  if (a.options.gated) print_gated_summary(r, a.options.steps);
  if (a.json) {
    print_train_json(r);
  } else {
    print_train_text(a.options, r);
  }
}

void add_train_bench(CLI::App* bench) {
  auto a = std::make_shared<TrainBenchArgs>();
  auto& t = a->options;
  auto* train = bench->add_subcommand(
      "train", "Training-step speed of headcount's Transformer: tokens/s, FLOPs, share of peak");
  add_config_args(train, a->config);
  train->add_option("--d-model", t.d_model)
      ->check(fits_config_key("model.d_model"))
      ->capture_default_str();
  train->add_option("--layers", t.layers)
      ->check(fits_config_key("model.encoder_layers"))
      ->capture_default_str();
  train->add_option("--heads", t.heads)
      ->check(fits_config_key("model.heads"))
      ->capture_default_str();
  train->add_option("--ffn", t.ffn)->check(fits_config_key("model.ffn_dim"))->capture_default_str();
  train->add_option("--vocab", t.vocab)
      ->check(fits_config_key("vocab.size"))
      ->capture_default_str();
  train->add_option("--sentences", t.sentences)
      ->check(integer_in(1, 100000))
      ->capture_default_str();
  // A sentence and its end token within the longest position table (model.max_positions).
  train->add_option("--length", t.length)->check(integer_in(1, 99999))->capture_default_str();
  train->add_option("--steps", t.steps)->check(integer_in(1, 100000))->capture_default_str();
  train->add_option("--warmup", t.warmup)->check(integer_in(0, 100000))->capture_default_str();
  train->add_flag("--json", a->json, "One JSON line");
  train->add_option("--profile", t.profile,
                    "Write LibTorch's profile of one step (Chrome trace JSON) to this file");
  train
      ->add_option("--precision", t.precision,
                   "auto | fp32 | bf16 (default: train.precision of the config)")
      ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
  train->add_flag("--gated", t.gated,
                  "Also time gated fine-tuning steps (L0 pruning as the config's prune section "
                  "sets it: by default gates on every head, lambda 0.05), alternating with plain "
                  "steps, and print their ratio");
  train->callback([a] { run_train(*a); });
}

void print_decode_setup(const bench::DecodeBench& b) {
  std::printf("%zu dev sentences, batch %d, %d repeats (alternating), device %s\n", b.ids.size(),
              b.info.config.decode.batch_size, b.options.repeats, b.device.str().c_str());
  for (size_t k = 0; k < b.choices.size(); ++k) {
    const auto& ch = b.choices[k];
    std::printf("precision %s: %s; %d intra-op threads\n", ch.name().c_str(), ch.reason.c_str(),
                b.intra_op_threads[k]);
  }
}

void print_decode_beam(int beam, const std::vector<bench::DecodeRowResult>& rows) {
  std::printf("\nbeam %d\n%-27s %-10s %12s %16s %10s %10s %8s %8s\n", beam, "model", "heads",
              "sentences/s", "(min-max)", "measured", "predicted", "ratio", "BLEU");
  for (const auto& r : rows) {
    std::printf("%-27s %-10s %12.1f %7.1f-%-8.1f %9.2fx %9.2fx %8.2f %8.2f\n", r.name.c_str(),
                r.heads.c_str(), r.sentences_per_s, r.slowest, r.fastest, r.measured, r.predicted,
                r.measured / r.predicted, r.bleu);
  }
}

// Sentences per second for each beam size (see bench/decode.h), a table a beam.
void run_decode(const bench::DecodeBenchOptions& o) {
  auto b = bench::prepare_decode_bench(o);
  print_decode_setup(b);
  for (int beam : o.beams) print_decode_beam(beam, bench::measure_beam(b, beam));
}

void add_decode_bench(CLI::App* bench) {
  auto d = std::make_shared<bench::DecodeBenchOptions>();
  auto* dec = bench->add_subcommand("decode", "Decoding speed (greedy and beam) on the dev set");
  dec->add_option("--checkpoint", d->checkpoint, "Checkpoint folder")
      ->required()
      ->check(checkpoint_folder());
  dec->add_option("--set", d->sets,
                  "Override a config key of the checkpoint (device, decode.*, threads.*)")
      ->type_name("KEY=VALUE");
  dec->add_option("--sentences", d->sentences, "Dev sentences (0: all)")
      ->check(integer_in(0, INT32_MAX))
      ->capture_default_str();
  dec->add_option("--beams", d->beams, "Beam sizes to measure")
      ->check(fits_config_key("decode.beam"))
      ->capture_default_str();
  dec->add_option("--compare", d->compare,
                  "A pruned checkpoint to time against CHECKPOINT (speed-up, and the speed-up "
                  "its FLOPs predict)")
      ->check(checkpoint_folder())
      ->check(CLI::ExistingDirectory);
  dec->add_option("--mask-from", d->mask_from,
                  "A prune run: also time CHECKPOINT with the heads it removed masked (no "
                  "physical pruning)")
      ->check(CLI::ExistingDirectory);
  dec->add_option("--precisions", d->precisions,
                  "Decode in each of these (auto, fp32, bf16), alternating; default: "
                  "decode.precision of the checkpoint's config")
      ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
  dec->add_option("--repeats", d->repeats, "Alternated repetitions")
      ->check(integer_in(1, 100))
      ->capture_default_str();
  dec->callback([d] { run_decode(*d); });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Benchmarks: BLAS, threads, training step, decoding (pruned vs full)");
  cmd->require_subcommand(1);
  add_blas_bench(cmd);
  add_threads_bench(cmd);
  add_train_bench(cmd);
  add_decode_bench(cmd);
}

}  // namespace headcount::cli
