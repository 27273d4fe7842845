// headcount bench: measured figures of this machine (BLAS speed, thread settings).
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sys/resource.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/precision.h"
#include "headcount/common/runtime.h"
#include "headcount/common/text.h"
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/eval/bleu.h"
#include "headcount/model/loss.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/head_gates.h"
#include "headcount/prune/prune_trainer.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/run_folder.h"

#include <nlohmann/json.hpp>

namespace headcount::cli {
namespace {

struct ThreadsArgs {
  int d_model = 256;
  int layers = 6;
  int heads = 8;
  int tokens = 2048;
  int repeats = 3;
};

void set_blas_threads(int n) {
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

// One training step (forward, backward, Adam) of LibTorch's own nn::Transformer at the shapes of
// `bench train` (d=256, 6+6 layers, 2048 target tokens), under each thread setting; settings
// alternate within every repeat so that machine noise hits them alike. Prints target tokens/s,
// median and spread.
// The bench flags' model shape, checked as the config checks model.d_model and model.heads.
void check_shape(int d_model, int heads) {
  HC_CHECK(d_model % heads == 0,
           "--d-model ({}) is not divisible by --heads ({}): every head takes d_model / heads "
           "dimensions",
           d_model, heads);
}

void bench_threads(const ThreadsArgs& a) {
  check_shape(a.d_model, a.heads);
  torch::manual_seed(1);
  const int64_t vocab = 8000, seq = 32, batch = std::max(1, a.tokens / 32);
  auto model = torch::nn::Transformer(torch::nn::TransformerOptions(a.d_model, a.heads)
                                          .num_encoder_layers(a.layers)
                                          .num_decoder_layers(a.layers)
                                          .dim_feedforward(4 * a.d_model)
                                          .dropout(0.1));
  auto emb = torch::nn::Embedding(vocab, a.d_model);
  auto out = torch::nn::Linear(a.d_model, vocab);
  std::vector<torch::Tensor> params = model->parameters();
  for (auto& p : emb->parameters()) params.push_back(p);
  for (auto& p : out->parameters()) params.push_back(p);
  torch::optim::Adam adam(params, torch::optim::AdamOptions(1e-4));
  auto src = torch::randint(vocab, {seq, batch});
  auto tgt = torch::randint(vocab, {seq, batch});
  auto mask = model->generate_square_subsequent_mask(seq);
  auto step = [&] {
    adam.zero_grad();
    auto h = model->forward(emb(src), emb(tgt), {}, mask);
    auto loss = torch::nn::functional::cross_entropy(out(h).view({-1, vocab}), tgt.view({-1}));
    loss.backward();
    adam.step();
  };
  struct Setting {
    int intra, blas;
    std::vector<double> rates;
  };
  std::vector<Setting> settings = {{1, 1, {}}, {2, 1, {}}, {2, 2, {}}, {1, 2, {}}};
  for (auto& s : settings) {
    s.intra = std::min(s.intra, runtime::num_cores());
  }
  step();  // warm-up
  for (int r = 0; r < a.repeats; ++r) {
    for (auto& s : settings) {
      at::set_num_threads(s.intra);
      set_blas_threads(s.blas);
      step();  // settle
      const auto t0 = std::chrono::steady_clock::now();
      step();
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      s.rates.push_back(static_cast<double>(seq * batch) / secs);
      std::fprintf(stderr, "repeat %d intra_op=%d blas=%d: %.0f tokens/s\n", r + 1, s.intra, s.blas,
                   s.rates.back());
    }
  }
  std::printf("nn::Transformer d=%d %d+%d layers %d heads, %lld target tokens/step, %d cores\n",
              a.d_model, a.layers, a.layers, a.heads, static_cast<long long>(seq * batch),
              runtime::num_cores());
  std::printf("%-10s %-6s %14s %10s %10s\n", "intra_op", "blas", "median tok/s", "min", "max");
  for (auto& s : settings) {
    auto v = s.rates;
    std::sort(v.begin(), v.end());
    std::printf("%-10d %-6d %14.0f %10.0f %10.0f\n", s.intra, s.blas, v[v.size() / 2], v.front(),
                v.back());
  }
}

struct TrainBenchArgs {
  int d_model = 256, layers = 6, heads = 8, ffn = 1024, vocab = 8000;
  int sentences = 64, length = 32;  // 2048 target tokens a step
  int steps = 5, warmup = 2;
  bool json = false;
  bool gated = false;     // also time gated fine-tuning steps, alternating with plain ones
  std::string profile;    // write a Chrome trace of one step here
  std::string precision;  // overrides train.precision when set
};

// FLOPs of one training step: 3x the forward matmuls (forward, and backward's two products).
double train_step_flops(const TrainBenchArgs& a) {
  const double B = a.sentences, L = a.length, D = a.d_model, F = a.ffn, V = a.vocab, N = a.layers;
  const double tokens = B * L;
  // Per layer and token: attention projections 4 D^2, feed-forward 2 D F (multiply-adds).
  const double enc = N * tokens * (4 * D * D + 2 * D * F) + N * B * 2 * L * L * D;
  const double dec = N * tokens * (8 * D * D + 2 * D * F) + N * B * 4 * L * L * D;
  const double out = tokens * D * V;
  return 3.0 * 2.0 * (enc + dec + out);
}

// Waits for the work queued on `device`: CUDA runs asynchronously, so a clock read without it
// times the launches, not the arithmetic.
void wait_for(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

// The device tensors sent to `device` land on ("cuda" names the current GPU: cuda:0).
torch::Device concrete(const torch::Device& device) {
  return torch::empty({0}, torch::TensorOptions().device(device)).device();
}

// Seconds that f() takes on `device`, its queued GPU work included.
template <typename F>
double timed_on(const torch::Device& device, F&& f) {
  wait_for(device);
  const auto t0 = std::chrono::steady_clock::now();
  f();
  wait_for(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The edge of the square products that measure a device's matmul peak: 2048 keeps the CPU's at
// ~0.1 s; a GPU finishes that in microseconds, launch-bound, so it gets 8192 (1.1 TFLOP, ~1-25 ms
// on an H100, 0.8 GB in fp32).
int64_t peak_matmul_size(const torch::Device& device) {
  return device.is_cuda() ? 8192 : 2048;
}

// The best of three n x n products in fp32 (CPU: OpenBLAS; CUDA: cuBLAS, TF32 as the global
// setting allows it) or bf16 (CPU: oneDNN; CUDA: cuBLAS), on the threads set now.
double matmul_peak_gflops(bool bf16 = false, const torch::Device& device = torch::kCPU) {
  torch::NoGradGuard g;
  const int64_t n = peak_matmul_size(device);
  const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat32;
  auto a = torch::randn({n, n}).to(device, dtype), b = torch::randn({n, n}).to(device, dtype);
  auto c = torch::mm(a, b);  // warm-up: cuBLAS handles and workspaces, oneDNN's kernels
  double best = 1e30;
  for (int i = 0; i < 3; ++i) best = std::min(best, timed_on(device, [&] { c = torch::mm(a, b); }));
  return 2.0 * static_cast<double>(n) * n * n / best / 1e9;
}

// The bench's Transformer at its shapes, with the dropouts of PyTorch's nn.Transformer (the peer):
// sublayer, attention and activation.
model::Transformer bench_model(const TrainBenchArgs& a, const torch::Device& device) {
  ModelConfig mc;
  mc.d_model = a.d_model;
  mc.ffn_dim = a.ffn;
  mc.encoder_layers = mc.decoder_layers = a.layers;
  mc.heads = a.heads;
  mc.dropout = 0.1;
  mc.attention_dropout = 0.1;
  mc.activation_dropout = 0.1;
  model::Transformer m(mc, model::Architecture::uniform(mc), a.vocab, a.vocab);
  m->to(device);
  m->train();
  return m;
}

// Page faults so far: first touching a page costs ~12 us on some virtual machines, more than the
// arithmetic on it (see runtime::keep_freed_memory).
double minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
}

// Plain against gated steps, timed alternately.
void print_gated_summary(std::vector<double> times, std::vector<double> gated_times, int steps) {
  std::sort(times.begin(), times.end());
  std::sort(gated_times.begin(), gated_times.end());
  const double plain = times[times.size() / 2], gated_median = gated_times[gated_times.size() / 2];
  std::printf(
      "plain step: median %.3f s; gated step: median %.3f s (min %.3f, max %.3f); gated / "
      "plain = %.3f (%d alternating pairs)\n",
      plain, gated_median, gated_times.front(), gated_times.back(), gated_median / plain, steps);
}

// The timed steps' median against the FLOPs and the matmul peak measured now on the device, as
// one JSON line or as text.
void report_train_bench(const TrainBenchArgs& a, const torch::Device& device,
                        const PrecisionChoice& precision, std::vector<double> times,
                        double faults_per_step) {
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const double tokens = static_cast<double>(a.sentences) * a.length;
  const double flops = train_step_flops(a);
  const double peak = matmul_peak_gflops(precision.bf16(), device);
  const double achieved = flops / median / 1e9;
  const int64_t peak_n = peak_matmul_size(device);
  // fp32 products on CUDA run in TF32 where the global setting allows it (LibTorch's default:
  // not), which changes the peak they reach.
  const bool tf32 = device.is_cuda() && !precision.bf16() && at::globalContext().allowTF32CuBLAS();
  if (a.json) {
    nlohmann::ordered_json j = {{"impl", "headcount"},
                                {"device", device.str()},
                                {"precision", precision.name()},
                                {"tokens_per_step", tokens},
                                {"step_seconds_median", median},
                                {"step_seconds_min", times.front()},
                                {"step_seconds_max", times.back()},
                                {"target_tokens_per_s", tokens / median},
                                {"gflop_per_step", flops / 1e9},
                                {"achieved_gflops", achieved},
                                {"matmul_peak_gflops", peak},
                                {"matmul_peak_size", peak_n},
                                {"fraction_of_peak", achieved / peak},
                                {"intra_op_threads", at::get_num_threads()},
                                {"page_faults_per_step", faults_per_step}};
    if (device.is_cuda()) j["tf32"] = tf32;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "headcount Transformer d=%d ffn=%d %d+%d layers %d heads vocab %d, %d x %d target tokens\n",
      a.d_model, a.ffn, a.layers, a.layers, a.heads, a.vocab, a.sentences, a.length);
  std::printf("device: %s\n", device.str().c_str());
  std::printf("precision: %s (%s)%s; %d LibTorch threads\n", precision.name().c_str(),
              precision.reason.c_str(), tf32 ? ", TF32 products" : "", at::get_num_threads());
  std::printf("step time: median %.3f s (min %.3f, max %.3f) over %d steps\n", median,
              times.front(), times.back(), a.steps);
  std::printf("target tokens/s: %.0f\n", tokens / median);
  std::printf("page faults per step: %.0f%s\n", faults_per_step,
              a.gated ? " (plain and gated steps together)" : "");
  std::printf(
      "FLOPs per step: %.1f GFLOP -> %.1f GFLOP/s; %s matmul peak measured now on %s (%lld^3): "
      "%.1f GFLOP/s; fraction of peak: %.0f%%\n",
      flops / 1e9, achieved, precision.name().c_str(), device.str().c_str(),
      static_cast<long long>(peak_n), peak, 100.0 * achieved / peak);
}

void bench_train(const TrainBenchArgs& a, const Config& config) {
  check_shape(a.d_model, a.heads);
  // The device the trainer would take (`device`; auto: CUDA when LibTorch sees a GPU). One that
  // cannot be used is resolve_device's error, never a silent fallback to the CPU.
  const torch::Device device = concrete(runtime::resolve_device(config.device));
  const auto precision = resolve_precision(
      a.precision.empty() ? config.train.precision : a.precision, device, "train.precision");
  runtime::apply_threads(config.threads, precision.bf16());
  torch::manual_seed(1);
  model::Transformer m = bench_model(a, device);
  torch::optim::Adam adam(m->parameters(),
                          torch::optim::AdamOptions(1e-4).betas({0.9, 0.98}).eps(1e-9));
  // Drawn on the CPU, so that every device trains on the same batch.
  auto src = torch::randint(4, a.vocab, {a.sentences, a.length}).to(device);
  auto tgt_in = torch::randint(4, a.vocab, {a.sentences, a.length}).to(device);
  auto tgt_out = torch::randint(4, a.vocab, {a.sentences, a.length}).to(device);
  // The forward pass under train.precision, as the trainer runs it (loss and backward outside).
  auto forward = [&] {
    PrecisionScope scope(precision, device);
    return m->forward(src, tgt_in);
  };
  // Parameters prune.train_parts freezes in the gated steps (none by default) train in the plain
  // ones.
  std::vector<torch::Tensor> frozen;
  auto step = [&] {
    for (auto& p : frozen) p.set_requires_grad(true);
    adam.zero_grad();
    auto ls = model::label_smoothed_loss(forward(), tgt_out, 0.1);
    (ls.loss / static_cast<double>(ls.tokens)).backward();
    adam.step();
  };
  // Gated fine-tuning: the library's L0 pruning (prune::L0Pruning) with the config's prune
  // section (by default gates on every head, lambda 0.05 x L_C), its parameter groups in one Adam
  // as the trainer builds it, a fresh gate sample each step.
  std::unique_ptr<prune::L0Pruning> l0;
  std::vector<train::ParamGroup> groups;
  std::unique_ptr<torch::optim::Adam> gated_adam;
  data::Batch batch;
  batch.ids.resize(static_cast<size_t>(a.sentences));
  int64_t gated_steps = 0;
  if (a.gated) {
    l0 = std::make_unique<prune::L0Pruning>(config, train::TrainOptions{});
    groups = l0->parameter_groups(m, device);
    for (auto& p : m->parameters()) {
      if (!p.requires_grad()) frozen.push_back(p);
    }
    gated_adam =
        train::make_adam(groups, torch::optim::AdamOptions(1e-4).betas({0.9, 0.98}).eps(1e-9));
    train::set_group_rates(*gated_adam, groups, 1e-4);
  }
  auto gated_step = [&] {
    for (auto& p : frozen) p.set_requires_grad(false);
    gated_adam->zero_grad();
    l0->before_forward(batch);
    auto ls = model::label_smoothed_loss(forward(), tgt_out, 0.1);
    const auto r = l0->regulariser(gated_steps);
    auto objective = ls.loss / static_cast<double>(ls.tokens);
    if (r.term.defined()) objective = objective + r.term;
    objective.backward();
    gated_adam->step();
    l0->after_step(gated_steps++, r);
    // The plain steps in between run without gates.
    l0->gates()->clear();
  };
  for (int i = 0; i < a.warmup; ++i) step();
  if (a.gated) gated_step();
  if (!a.profile.empty()) {
    torch::autograd::profiler::RecordProfile guard(a.profile);
    step();
  }
  std::vector<double> times, gated_times;
  auto timed = [&](auto&& f) { return timed_on(device, f); };
  const double faults_before = minor_faults();
  for (int i = 0; i < a.steps; ++i) {
    times.push_back(timed(step));
    if (a.gated) gated_times.push_back(timed(gated_step));
  }
  const double faults_per_step = (minor_faults() - faults_before) / a.steps;
  if (a.gated) print_gated_summary(times, gated_times, a.steps);
  report_train_bench(a, device, precision, times, faults_per_step);
}

struct DecodeBenchArgs {
  std::string checkpoint;
  std::vector<std::string> sets;  // overrides of the checkpoint's config (device, decode.*, ...)
  std::string compare;            // a pruned checkpoint to compare with
  std::string mask_from;          // a prune run whose removed heads are masked in the full model
  int sentences = 0;              // 0: the whole dev set
  std::vector<int> beams = {1, 4};
  int repeats = 3;
  std::vector<std::string> precisions;  // empty: decode.precision of the checkpoint's config
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Sentences per second on the dev set of the checkpoint's data config, for each beam size; with
// --compare, a pruned checkpoint (and with --mask-from, the full model with the same heads
// masked) measured alternately, against the speed-up its FLOPs predict.
void bench_decode(const DecodeBenchArgs& a) {
  auto info = run::read_checkpoint_info(a.checkpoint);
  info.config = with_overrides(info.config, a.checkpoint + "/config.yaml", a.sets);
  const Config& c = info.config;
  runtime::apply_threads(c.threads);
  // The checkpoint's `device` (or --set device=...); one that cannot be used is an error.
  const auto device = concrete(runtime::resolve_device(c.device));
  struct Variant {
    std::string name;
    run::CheckpointInfo info;
    model::Transformer model{nullptr};
    std::map<std::pair<int, int64_t>, torch::Tensor> masks;
  };
  std::vector<Variant> variants;
  variants.push_back({"full", info, run::load_model(info, device), {}});
  if (!a.compare.empty()) {
    const auto pi = run::read_checkpoint_info(a.compare);
    HC_CHECK(pi.src_vocab_size == info.src_vocab_size && pi.tgt_vocab_size == info.tgt_vocab_size,
             "--compare {}: another vocabulary than {}", a.compare, a.checkpoint);
    variants.push_back({"pruned", pi, run::load_model(pi, device), {}});
  }
  if (!a.mask_from.empty()) {
    // The full model with the heads the prune run removed multiplied by 0 (no physical pruning).
    Variant v{"masked", info, run::load_model(info, device), {}};
    const fs::path csv = run::RunFolder{a.mask_from}.head_removal();
    int removed = 0;
    for (const auto& row : run::read_head_removal(csv)) {
      if (!row.removal_step) continue;
      const auto& h = row.head;
      auto layers = v.model->attention_layers(h.type);
      HC_CHECK(h.layer >= 0 && h.layer < static_cast<int64_t>(layers.size()) && h.head >= 0 &&
                   h.head < layers[h.layer]->num_heads(),
               "{}: {} is not in {}", csv.string(), h.label(), a.checkpoint);
      auto& m = v.masks[{static_cast<int>(h.type), h.layer}];
      if (!m.defined()) m = torch::ones({layers[h.layer]->num_heads()}, device);
      m[h.head] = 0.0;
      ++removed;
    }
    for (auto& [key, m] : v.masks)
      v.model->attention_layers(static_cast<model::AttentionType>(key.first))[key.second]
          ->set_head_scale(m);
    v.name = fmt::format("masked ({} heads)", removed);
    variants.push_back(std::move(v));
  }
  for (auto& v : variants) v.model->eval();
  const auto src_vocab = data::Vocab::load(info.vocab.src_model);
  const auto corpus = data::load_checkpoint_corpus(c.data, overrides_key(a.sets, "data.prepare"));
  std::vector<std::vector<int>> ids;
  std::vector<int64_t> src_len;
  for (const auto& s : corpus.dev.src) {
    if (a.sentences > 0 && static_cast<int>(ids.size()) >= a.sentences) break;
    ids.push_back(src_vocab.encode(s));
    src_len.push_back(static_cast<int64_t>(ids.back().size()) + 1);
  }
  std::vector<std::string> precisions = a.precisions;
  if (precisions.empty()) precisions.push_back(c.decode.precision);
  std::vector<PrecisionChoice> choices;
  for (const auto& p : precisions)
    choices.push_back(resolve_precision(p, device, "decode.precision"));
  std::printf("%zu dev sentences, batch %d, %d repeats (alternating), device %s\n", ids.size(),
              c.decode.batch_size, a.repeats, device.str().c_str());
  for (const auto& ch : choices) {
    std::printf("precision %s: %s; %d intra-op threads\n", ch.name().c_str(), ch.reason.c_str(),
                runtime::intra_op_threads(c.threads, ch.bf16()));
  }
  // Dev BLEU of each row's output, against the first reference (the speed must come at equal
  // quality).
  std::vector<std::string> refs(corpus.dev.tgt.begin(), corpus.dev.tgt.begin() + ids.size());
  const auto tgt_vocab = data::Vocab::load(info.vocab.tgt_model);
  torch::NoGradGuard no_grad;
  struct Row {
    size_t variant;
    size_t precision;
    std::string name;
  };
  std::vector<Row> rows;
  for (size_t k = 0; k < variants.size(); ++k) {
    for (size_t p = 0; p < choices.size(); ++p) {
      rows.push_back(
          {k, p,
           choices.size() > 1 ? variants[k].name + " " + choices[p].name() : variants[k].name});
    }
  }
  for (int beam : a.beams) {
    auto o = decode::SearchOptions::from(c.decode);
    o.beam = beam;
    std::vector<std::vector<double>> secs(rows.size());
    std::vector<std::vector<int64_t>> out_len(rows.size());
    std::vector<double> bleu(rows.size());
    for (int r = 0; r < a.repeats; ++r) {
      for (size_t k = 0; k < rows.size(); ++k) {
        const auto& ch = choices[rows[k].precision];
        o.precision = ch.name();
        at::set_num_threads(runtime::intra_op_threads(c.threads, ch.bf16()));
        std::vector<std::vector<int64_t>> out;
        secs[k].push_back(timed_on(device, [&] {
          out = decode::translate_ids(variants[rows[k].variant].model, ids, o, c.decode.batch_size,
                                      device);
        }));
        if (r == 0) {
          std::vector<std::string> hyps;
          for (const auto& x : out) {
            out_len[k].push_back(static_cast<int64_t>(x.size()) + 1);
            hyps.push_back(tgt_vocab.decode(std::vector<int>(x.begin(), x.end())));
          }
          bleu[k] = eval::Bleu().corpus_score(hyps, {refs}).score;
        }
      }
    }
    std::printf("\nbeam %d\n%-27s %-10s %12s %16s %10s %10s %8s %8s\n", beam, "model", "heads",
                "sentences/s", "(min-max)", "measured", "predicted", "ratio", "BLEU");
    const double base = median_of(secs[0]);
    // Each model's FLOPs on its own output lengths (a pruned model may stop earlier or later);
    // a masked model computes everything the full one does.
    const double base_flops = model::decode_flops(variants[0].info.architecture, c.model,
                                                  info.tgt_vocab_size, src_len, out_len[0], beam);
    for (size_t k = 0; k < rows.size(); ++k) {
      const auto& v = variants[rows[k].variant];
      const double med = median_of(secs[k]);
      const auto [lo, hi] = std::minmax_element(secs[k].begin(), secs[k].end());
      const double measured = base / med;
      const double flops = model::decode_flops(v.info.architecture, c.model, info.tgt_vocab_size,
                                               src_len, out_len[k], beam);
      const double predicted = base_flops / flops;
      std::printf("%-27s %-10s %12.1f %7.1f-%-8.1f %9.2fx %9.2fx %8.2f %8.2f\n",
                  rows[k].name.c_str(), v.info.architecture.summary().c_str(), ids.size() / med,
                  ids.size() / *hi, ids.size() / *lo, measured, predicted, measured / predicted,
                  bleu[k]);
    }
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Benchmarks: BLAS, threads, training step, decoding (pruned vs full)");
  cmd->require_subcommand(1);
  auto* blas = cmd->add_subcommand("blas", "Identify the BLAS and measure its matmul speed");
  blas->callback([] {
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
    set_blas_threads(cores);
    std::printf("fp32 matmul 2048^3: %.1f GFLOP/s (BLAS threads: %d)\n", matmul_peak_gflops(false),
                cores);
    const std::string native = cpu_native_bf16();
    if (native.empty()) {
      std::printf(
          "bf16 matmul: no native bf16 arithmetic on this CPU (bf16 precision unavailable)\n");
    } else {
      for (int n : {1, cores}) {
        at::set_num_threads(n);
        std::printf("bf16 matmul 2048^3: %.1f GFLOP/s (oneDNN, %d thread%s; CPU has %s)\n",
                    matmul_peak_gflops(true), n, n == 1 ? "" : "s", native.c_str());
        if (cores == 1) break;
      }
    }
  });
  auto a = std::make_shared<ThreadsArgs>();
  auto* threads = cmd->add_subcommand(
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
  threads->callback([a] { bench_threads(*a); });

  auto t = std::make_shared<TrainBenchArgs>();
  auto targs = std::make_shared<ConfigArgs>();
  auto* train = cmd->add_subcommand(
      "train", "Training-step speed of headcount's Transformer: tokens/s, FLOPs, share of peak");
  add_config_args(train, *targs);
  train->add_option("--d-model", t->d_model)
      ->check(fits_config_key("model.d_model"))
      ->capture_default_str();
  train->add_option("--layers", t->layers)
      ->check(fits_config_key("model.encoder_layers"))
      ->capture_default_str();
  train->add_option("--heads", t->heads)
      ->check(fits_config_key("model.heads"))
      ->capture_default_str();
  train->add_option("--ffn", t->ffn)
      ->check(fits_config_key("model.ffn_dim"))
      ->capture_default_str();
  train->add_option("--vocab", t->vocab)
      ->check(fits_config_key("vocab.size"))
      ->capture_default_str();
  train->add_option("--sentences", t->sentences)
      ->check(integer_in(1, 100000))
      ->capture_default_str();
  // A sentence and its end token within the longest position table (model.max_positions).
  train->add_option("--length", t->length)->check(integer_in(1, 99999))->capture_default_str();
  train->add_option("--steps", t->steps)->check(integer_in(1, 100000))->capture_default_str();
  train->add_option("--warmup", t->warmup)->check(integer_in(0, 100000))->capture_default_str();
  train->add_flag("--json", t->json, "One JSON line");
  train->add_option("--profile", t->profile,
                    "Write LibTorch's profile of one step (Chrome trace JSON) to this file");
  train
      ->add_option("--precision", t->precision,
                   "auto | fp32 | bf16 (default: train.precision of the config)")
      ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
  train->add_flag("--gated", t->gated,
                  "Also time gated fine-tuning steps (L0 pruning as the config's prune section "
                  "sets it: by default gates on every head, lambda 0.05), alternating with plain "
                  "steps, and print their ratio");
  auto d = std::make_shared<DecodeBenchArgs>();
  auto* dec = cmd->add_subcommand("decode", "Decoding speed (greedy and beam) on the dev set");
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
  dec->callback([d] { bench_decode(*d); });

  train->callback([t, targs] {
    Config config;
    if (!resolve_config(*targs, &config)) return;
    bench_train(*t, config);
  });
}

}  // namespace headcount::cli
