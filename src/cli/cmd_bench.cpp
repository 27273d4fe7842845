// headcount bench: measured figures of this machine (BLAS speed, thread settings, training and
// decoding speed). The measurements are the library's (include/headcount/bench/); this file
// registers the options and prints.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "headcount/bench/decode.h"
#include "headcount/bench/report.h"
#include "headcount/bench/threads.h"
#include "headcount/bench/timing.h"
#include "headcount/bench/train.h"
#include "headcount/common/outputs.h"
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
  runtime::set_blas_threads(cores);
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

void run_train(const TrainBenchArgs& a) {
  std::vector<io::NamedPath> configs;
  for (const auto& f : a.config.files) configs.push_back({"a config file", f});
  io::refuse_overwriting({{"--profile", a.options.profile}}, configs);
  Config config;
  if (!resolve_config(a.config, &config)) return;
  const auto r = bench::bench_train(a.options, config);
  if (a.options.gated) std::fputs(bench::gated_summary(r, a.options.steps).c_str(), stdout);
  std::fputs((a.json ? bench::train_json(r) : bench::train_text(a.options, r)).c_str(), stdout);
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

// Sentences per second for each beam size (see bench/decode.h), a table a beam.
void run_decode(const bench::DecodeBenchOptions& o) {
  auto b = bench::prepare_decode_bench(o);
  std::fputs(bench::decode_setup_text(b).c_str(), stdout);
  for (int beam : o.beams)
    std::fputs(bench::decode_beam_table(beam, bench::measure_beam(b, beam)).c_str(), stdout);
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
