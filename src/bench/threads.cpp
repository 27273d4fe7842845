#include "headcount/bench/threads.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>

#include "headcount/bench/timing.h"
#include "headcount/common/runtime.h"

namespace headcount::bench {

ThreadsResult bench_threads(const ThreadsOptions& a,
                            const std::function<void(int repeat, const ThreadSetting&)>& measured) {
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
  ThreadsResult r;
  r.tokens_per_step = seq * batch;
  r.settings = {{1, 1, {}}, {2, 1, {}}, {2, 2, {}}, {1, 2, {}}};
  for (auto& s : r.settings) s.intra = std::min(s.intra, runtime::num_cores());
  step();  // warm-up
  for (int rep = 0; rep < a.repeats; ++rep) {
    for (auto& s : r.settings) {
      at::set_num_threads(s.intra);
      runtime::set_blas_threads(s.blas);
      step();  // settle
      const auto t0 = std::chrono::steady_clock::now();
      step();
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      s.rates.push_back(static_cast<double>(seq * batch) / secs);
      if (measured) measured(rep + 1, s);
    }
  }
  return r;
}

}  // namespace headcount::bench
