// headcount bench: measured figures of this machine (BLAS speed, thread settings).
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "headcount/common/runtime.h"

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
// PERF.md, under each thread setting; settings alternate within every repeat so that machine
// noise hits them alike. Prints target tokens/s, median and spread.
void bench_threads(const ThreadsArgs& a) {
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

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks: BLAS speed and thread settings");
  cmd->require_subcommand(1);
  auto* blas = cmd->add_subcommand("blas", "Identify the BLAS and measure its matmul speed");
  blas->callback([] {
    const auto b = runtime::probe_blas();
    std::printf("BLAS: %s\nlibrary: %s\nsgemm 384x384: %.1f GFLOP/s%s\n", b.vendor.c_str(),
                b.library.c_str(), b.gflops,
                b.slow ? "  (SLOW: install libopenblas0-pthread)" : "");
  });
  auto a = std::make_shared<ThreadsArgs>();
  auto* threads = cmd->add_subcommand(
      "threads", "Training-step speed under intra-op x BLAS thread settings (alternated)");
  threads->add_option("--d-model", a->d_model)->capture_default_str();
  threads->add_option("--layers", a->layers)->capture_default_str();
  threads->add_option("--heads", a->heads)->capture_default_str();
  threads->add_option("--tokens", a->tokens, "Target tokens per step")->capture_default_str();
  threads->add_option("--repeats", a->repeats)->check(CLI::Range(1, 100))->capture_default_str();
  threads->callback([a] { bench_threads(*a); });
}

}  // namespace headcount::cli
