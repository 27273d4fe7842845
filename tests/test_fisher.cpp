// Fisher post-training pruning (Kwon et al. 2022): the Fisher estimate against per-sentence
// gradients computed one sentence at a time (and a finite difference), the least-squares refit
// against LibTorch's lstsq and its normal equations, the mask search and the rearrangement
// against brute force, and the `prune --method fisher` run folder.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/data/vocab.h"
#include "headcount/prune/fisher.h"
#include "headcount/prune/head_gates.h"
#include "headcount/run/checkpoint.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using model::AttentionType;

std::vector<data::Example> random_examples(int n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::vector<data::Example> out;
  for (int i = 0; i < n; ++i) {
    data::Example e;
    const int ls = 2 + static_cast<int>(rng() % 6), lt = 2 + static_cast<int>(rng() % 6);
    for (int k = 0; k < ls; ++k) e.src.push_back(4 + static_cast<int>(rng() % 16));
    for (int k = 0; k < lt; ++k) e.tgt.push_back(4 + static_cast<int>(rng() % 16));
    e.id = i;
    out.push_back(e);
  }
  return out;
}

model::Transformer random_model() {
  torch::manual_seed(7);
  const ModelConfig c = small_model_config();
  model::Transformer m(c, model::Architecture::uniform(c), 20, 20);
  m->eval();
  return m;
}

// The summed token cross-entropy of one sentence, with every head of every layer scaled by
// `scales` (key -> [H]).
torch::Tensor sentence_loss(model::Transformer& m, const data::Example& e,
                            const std::map<std::string, torch::Tensor>& scales) {
  for (auto type : model::kAttentionTypes) {
    auto attns = m->attention_layers(type);
    for (size_t i = 0; i < attns.size(); ++i)
      attns[i]->set_head_scale(scales.at(prune::HeadGatesImpl::key(type, static_cast<int>(i))));
  }
  const auto b = data::collate({e}, {0}, torch::kCPU);
  const auto logits = m->forward(b.src, b.tgt_in);
  return torch::nll_loss(torch::log_softmax(logits.reshape({-1, logits.size(-1)}), -1),
                         b.tgt_out.reshape(-1), {}, at::Reduction::Sum, data::kPadId);
}

TEST(Fisher, MatchesPerSentenceGradientsComputedOneSentenceAtATime) {
  auto m = random_model();
  const auto examples = random_examples(9, 3);
  const std::vector<AttentionType> types(std::begin(model::kAttentionTypes),
                                         std::end(model::kAttentionTypes));
  // Batched (several sentences per batch, padding), per-sentence gradients through [B, H] masks.
  const auto stats = prune::calibrate(m, examples, types, 40, torch::kCPU, false);
  EXPECT_EQ(stats.sentences, 9);
  // Only the masks' gradients are taken: the weights' .grad are left as they were (undefined).
  for (const auto& p : m->parameters()) EXPECT_FALSE(p.grad().defined());
  ASSERT_EQ(stats.fisher.size(), 6u);  // 2 enc_self + 2 dec_self + 2 enc_dec layers

  // Reference: one sentence at a time, a plain [H] mask per layer, autograd::grad.
  std::map<std::string, torch::Tensor> ref;
  for (const auto& [key, f] : stats.fisher) ref[key] = torch::zeros_like(f);
  for (const auto& e : examples) {
    std::map<std::string, torch::Tensor> scales;
    std::vector<std::string> keys;
    std::vector<torch::Tensor> leaves;
    for (const auto& [key, f] : stats.fisher) {
      scales[key] = torch::ones({f.size(0)}, torch::requires_grad());
      keys.push_back(key);
      leaves.push_back(scales[key]);
    }
    const auto loss = sentence_loss(m, e, scales);
    const auto grads = torch::autograd::grad({loss}, leaves);
    for (size_t i = 0; i < keys.size(); ++i) {
      const auto g = grads[i].to(torch::kDouble);
      ref[keys[i]] += torch::outer(g, g);
    }
  }
  for (const auto& [key, f] : stats.fisher) {
    const auto r = ref[key] / 9.0;
    EXPECT_TRUE(torch::allclose(f, r, 1e-4, 1e-7)) << key << "\n" << f << "\n" << r;
    EXPECT_GT(f.diagonal().sum().item<double>(), 0) << key;
  }

  // One derivative by a central difference (fp32: loose tolerance).
  const auto& e = examples[0];
  std::map<std::string, torch::Tensor> plus, minus, ones;
  for (const auto& [key, f] : stats.fisher) ones[key] = torch::ones({f.size(0)});
  plus = ones, minus = ones;
  const double eps = 1e-2;
  plus["dec_self.1"] = ones["dec_self.1"].clone();
  plus["dec_self.1"][2] = 1 + eps;
  minus["dec_self.1"] = ones["dec_self.1"].clone();
  minus["dec_self.1"][2] = 1 - eps;
  torch::NoGradGuard no_grad;
  const double fd =
      (sentence_loss(m, e, plus).item<double>() - sentence_loss(m, e, minus).item<double>()) /
      (2 * eps);
  std::map<std::string, torch::Tensor> scales;
  {
    torch::AutoGradMode on(true);
    for (const auto& [key, f] : stats.fisher)
      scales[key] = torch::ones({f.size(0)}, torch::requires_grad());
    const auto loss = sentence_loss(m, e, scales);
    const auto g = torch::autograd::grad({loss}, {scales["dec_self.1"]})[0];
    EXPECT_NEAR(g[2].item<double>(), fd, 2e-3 + 0.02 * std::abs(fd));
  }
}

TEST(Fisher, RefitIsTheLeastSquaresSolutionAndReproducesAnUnprunedLayer) {
  torch::manual_seed(11);
  const int64_t n = 300, heads = 4, dh = 3, d = 5;
  const auto z = torch::randn({n, heads * dh}, torch::kDouble);
  const auto w = torch::randn({d, heads * dh}, torch::kDouble);
  const auto b = torch::randn({d}, torch::kDouble);
  const auto y = z.matmul(w.t()) + b;
  const auto x_full = torch::cat({z, torch::ones({n, 1}, torch::kDouble)}, 1);
  const auto gram = x_full.t().matmul(x_full);

  // Nothing removed, no ridge: the layer itself.
  {
    auto [w2, b2] = prune::refit_output_projection(gram, w, b, {true, true, true, true}, 0.0);
    EXPECT_TRUE(torch::allclose(w2, w, 1e-9, 1e-9));
    EXPECT_TRUE(torch::allclose(b2, b, 1e-9, 1e-9));
  }
  // Head 1 removed: the least-squares fit of y from the kept heads' outputs and a constant.
  const std::vector<bool> keep = {true, false, true, true};
  std::vector<int64_t> cols;
  for (int64_t h = 0; h < heads; ++h)
    if (keep[static_cast<size_t>(h)])
      for (int64_t k = 0; k < dh; ++k) cols.push_back(h * dh + k);
  const auto zk = z.index_select(1, torch::tensor(cols));
  const auto x = torch::cat({zk, torch::ones({n, 1}, torch::kDouble)}, 1);
  const auto expected = std::get<0>(torch::linalg_lstsq(x, y, {}, {}));  // [10, d]
  prune::LayerRefit fit{"enc_self.0"};
  auto [w2, b2] = prune::refit_output_projection(gram, w, b, keep, 0.0, &fit);
  EXPECT_TRUE(torch::allclose(w2.index_select(1, torch::tensor(cols)), expected.slice(0, 0, 9).t(),
                              1e-8, 1e-8));
  // Its errors against the unpruned output, computed here from the outputs themselves: before,
  // the kept heads through the old W and b; after, through the refit ones.
  EXPECT_EQ(fit.layer, "enc_self.0");
  EXPECT_EQ(fit.heads, 4);
  EXPECT_EQ(fit.heads_kept, 3);
  EXPECT_EQ(fit.tokens, n);
  const double yy = y.pow(2).sum().item<double>();
  const double before =
      (zk.matmul(w.index_select(1, torch::tensor(cols)).t()) + b - y).pow(2).sum().item<double>();
  EXPECT_NEAR(fit.target_sq, yy, 1e-9 * yy);
  EXPECT_NEAR(fit.error_before, before, 1e-8 * yy);
  EXPECT_NEAR(fit.error_after, (z.matmul(w2.t()) + b2 - y).pow(2).sum().item<double>(), 1e-8 * yy);
  EXPECT_LT(fit.error_after, fit.error_before);
  EXPECT_TRUE(torch::allclose(b2, expected[9], 1e-8, 1e-8));
  EXPECT_EQ(w2.slice(1, dh, 2 * dh).abs().max().item<double>(), 0.0);  // removed head's columns
  // Optimality: the residual is orthogonal to every kept input and to the constant.
  const auto pred = z.matmul(w2.t()) + b2;
  EXPECT_LT((x.t().matmul(pred - y)).abs().max().item<double>(), 1e-7);
  // With a ridge: the normal equations with lambda on the weights only.
  const double ridge = 0.05;
  auto [w3, b3] = prune::refit_output_projection(gram, w, b, keep, ridge);
  const double lambda = ridge * zk.pow(2).sum(0).mean().item<double>();
  const auto pred3 = z.matmul(w3.t()) + b3;
  auto reg = torch::cat(
      {w3.index_select(1, torch::tensor(cols)).t(), torch::zeros({1, d}, torch::kDouble)}, 0);
  EXPECT_LT((x.t().matmul(pred3 - y) + lambda * reg).abs().max().item<double>(), 1e-7);
  // Every head removed: the mean output.
  auto [w4, b4] = prune::refit_output_projection(gram, w, b, {false, false, false, false}, 0.0);
  EXPECT_TRUE(torch::allclose(b4, y.mean(0), 1e-9, 1e-9));
  EXPECT_EQ(w4.abs().max().item<double>(), 0.0);
}

TEST(Fisher, SearchFindsTheCheapestRemovalUnderEachBudgetByBruteForce) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const std::map<AttentionType, int> sizes = {
      {AttentionType::kEncSelf, 4}, {AttentionType::kDecSelf, 3}, {AttentionType::kEncDec, 5}};
  std::map<AttentionType, std::vector<double>> scores;
  std::vector<std::pair<AttentionType, double>> flat;
  for (const auto& [t, n] : sizes)
    for (int i = 0; i < n; ++i) {
      scores[t].push_back(u(rng));
      flat.emplace_back(t, scores[t].back());
    }
  prune::SearchBudget budget;
  budget.cost = {{AttentionType::kEncSelf, 1.0},
                 {AttentionType::kDecSelf, 2.5},
                 {AttentionType::kEncDec, 1.7}};
  budget.fixed = 3.0;
  for (double limit : {3.0, 6.0, 10.0, 14.0, 40.0}) {
    budget.limit = limit;
    // Brute force over every subset of the 12 heads.
    double best = std::numeric_limits<double>::infinity();
    for (int mask = 0; mask < (1 << flat.size()); ++mask) {
      double cost = budget.fixed, loss = 0;
      for (size_t i = 0; i < flat.size(); ++i) {
        if (mask & (1 << i))
          cost += budget.cost.at(flat[i].first);
        else
          loss += flat[i].second;
      }
      if (cost <= limit) best = std::min(best, loss);
    }
    const auto k = prune::search_counts(scores, budget);
    double loss = 0, cost = budget.fixed;
    for (const auto& [t, s] : scores) {
      auto sorted = s;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < sorted.size() - static_cast<size_t>(k.at(t)); ++i) loss += sorted[i];
      cost += static_cast<double>(k.at(t)) * budget.cost.at(t);
    }
    EXPECT_LE(cost, limit);
    EXPECT_NEAR(loss, best, 1e-12) << "limit " << limit;
  }
  // Exactly N heads in all: the N largest scores, whatever their type.
  prune::SearchBudget exact;
  exact.exact_total = 5;
  const auto k = prune::search_counts(scores, exact);
  auto all = flat;
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::map<AttentionType, int64_t> expected;
  for (const auto& [t, n] : sizes) expected[t] = 0;
  for (int i = 0; i < 5; ++i) ++expected[all[static_cast<size_t>(i)].first];
  EXPECT_EQ(k, expected);
  // A budget below the fixed cost is an error, not an empty model.
  budget.limit = 1.0;
  EXPECT_NE(testing::error_of([&] {
              prune::search_counts(scores, budget);
            }).find("no choice of heads meets the budget"),
            std::string::npos);
}

// 1_Z^T F 1_Z over the heads `kept` leaves out.
double removed_loss(const torch::Tensor& f, const std::vector<bool>& kept) {
  double s = 0;
  for (size_t i = 0; i < kept.size(); ++i)
    for (size_t j = 0; j < kept.size(); ++j)
      if (!kept[i] && !kept[j])
        s += f[static_cast<int64_t>(i)][static_cast<int64_t>(j)].item<double>();
  return s;
}

std::vector<bool> first_kept(int64_t heads, int64_t keep) {
  std::vector<bool> k(static_cast<size_t>(heads), false);
  std::fill(k.begin(), k.begin() + keep, true);
  return k;
}

TEST(Fisher, RearrangementFindsTheBestSubsetOfALayer) {
  torch::manual_seed(3);
  const auto a = torch::randn({6, 20}, torch::kDouble);
  const auto block = a.matmul(a.t()) / 20;  // a Fisher block is a Gram matrix: PSD
  for (int64_t keep = 0; keep <= 6; ++keep) {
    const auto got = prune::rearrange_layer(block, first_kept(6, keep));
    EXPECT_EQ(std::count(got.begin(), got.end(), true), keep);
    double best = std::numeric_limits<double>::infinity();
    for (int mask = 0; mask < 64; ++mask) {
      if (__builtin_popcount(mask) != keep) continue;
      std::vector<bool> kept(6);
      for (int i = 0; i < 6; ++i) kept[static_cast<size_t>(i)] = (mask >> i) & 1;
      best = std::min(best, removed_loss(block, kept));
    }
    EXPECT_NEAR(removed_loss(block, got), best, 1e-12) << "keep " << keep;
  }
  // Every subset scores the same: the search's choice stays (not the first subset enumerated).
  const std::vector<bool> start = {false, true, false, true, true, false};
  EXPECT_EQ(prune::rearrange_layer(torch::ones({6, 6}, torch::kDouble), start), start);
}

TEST(Fisher, RearrangementOfALargeLayerImprovesOnTheSearchsChoiceBySwaps) {
  // 24 choose 12 subsets: too many to try, so swaps from the search's choice.
  torch::manual_seed(5);
  const auto a = torch::randn({24, 40}, torch::kDouble);
  const auto block = a.matmul(a.t()) / 40;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3; ++trial) {
    auto start = first_kept(24, 12);
    std::shuffle(start.begin(), start.end(), rng);
    const auto got = prune::rearrange_layer(block, start);
    EXPECT_EQ(std::count(got.begin(), got.end(), true), 12);
    const double l = removed_loss(block, got);
    EXPECT_LT(l, removed_loss(block, start));  // random starts are not local optima here
    // A local optimum: no swap of a kept and a removed head lowers it.
    for (size_t i = 0; i < got.size(); ++i) {
      for (size_t j = 0; j < got.size(); ++j) {
        if (!got[i] || got[j]) continue;
        auto swapped = got;
        swapped[i] = false, swapped[j] = true;
        EXPECT_GE(removed_loss(block, swapped), l - 1e-9) << "swap " << i << " " << j;
      }
    }
  }
  // Where the search's choice is already optimal it stays, whatever greedy removal from scratch
  // would pick: F = diag(d), the removed set with the smallest d is optimal.
  std::vector<double> d(24);
  for (size_t i = 0; i < d.size(); ++i) d[i] = 1.0 + static_cast<double>((i * 7) % 24);
  auto start = std::vector<bool>(24);
  for (size_t i = 0; i < d.size(); ++i) start[i] = d[i] > 12.5;
  EXPECT_EQ(prune::rearrange_layer(torch::diag(torch::tensor(d, torch::kDouble)), start), start);
}

TEST(Fisher, CalibrationGramRefitsAnUnprunedLayerToItself) {
  auto m = random_model();
  const auto examples = random_examples(40, 9);
  const auto stats = prune::calibrate(m, examples, {AttentionType::kEncDec}, 80, torch::kCPU, true);
  const auto attn = m->attention_layers(AttentionType::kEncDec)[1];
  const auto& gram = stats.gram.at("enc_dec.1");
  // The Gram's constant corner counts the decoder's non-padding query tokens.
  int64_t tokens = 0;
  for (const auto& e : examples) tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  EXPECT_EQ(gram[-1][-1].item<double>(), static_cast<double>(tokens));
  auto [w, b] = prune::refit_output_projection(gram, attn->out_proj_weight, attn->out_proj_bias,
                                               {true, true, true, true}, 0.0);
  EXPECT_TRUE(torch::allclose(w, attn->out_proj_weight, 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(b, attn->out_proj_bias, 1e-4, 1e-5));
}

// Kept-head outputs [N, H*Dh] of every attention layer with heads (non-padding queries), from the
// model's own forward over `examples` as one batch.
std::map<std::string, torch::Tensor> recorded_head_outputs(model::Transformer& m,
                                                           const std::vector<data::Example>& ex) {
  std::vector<int64_t> idx(ex.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  const auto b = data::collate(ex, idx, torch::kCPU);
  for (auto type : model::kAttentionTypes)
    for (auto& a : m->attention_layers(type)) a->set_record(true);
  m->forward(b.src, b.tgt_in);
  std::map<std::string, torch::Tensor> out;
  for (auto type : model::kAttentionTypes) {
    auto attns = m->attention_layers(type);
    const auto& queries = type == AttentionType::kEncSelf ? b.src : b.tgt_in;
    const auto rows = queries.reshape(-1).ne(data::kPadId).nonzero().squeeze(1);
    for (size_t i = 0; i < attns.size(); ++i) {
      attns[i]->set_record(false);
      if (attns[i]->num_heads() == 0) continue;
      const auto h = attns[i]->last_head_outputs();  // [B, H, T, Dh]
      out[prune::HeadGatesImpl::key(type, static_cast<int>(i))] =
          h.permute({0, 2, 1, 3}).reshape({h.size(0) * h.size(2), -1}).index_select(0, rows);
    }
  }
  return out;
}

// [W^T; b^T] of an attention layer's output projection, double.
torch::Tensor projection(const model::MultiheadAttention& a) {
  if (a->num_heads() == 0) return a->out_proj_bias.unsqueeze(0).to(torch::kDouble);
  return torch::cat({a->out_proj_weight.t(), a->out_proj_bias.unsqueeze(0)}, 0).to(torch::kDouble);
}

torch::Tensor with_constant(const torch::Tensor& z) {
  const auto x = z.to(torch::kDouble);
  return torch::cat({x, torch::ones({x.size(0), 1}, x.options())}, 1);
}

TEST(Fisher, SequentialRefitIsTheLeastSquaresFitOnThePrunedModelsOwnInputs) {
  const auto examples = random_examples(40, 21);
  for (bool pre_norm : {false, true}) {
    SCOPED_TRACE(pre_norm ? "pre-norm" : "post-norm");
    torch::manual_seed(7);
    ModelConfig c = small_model_config();
    c.pre_norm = pre_norm;
    c.dropout = c.attention_dropout = 0.1;  // the pass must run in eval mode
    model::Transformer reference(c, model::Architecture::uniform(c), 20, 20);
    reference->eval();
    // Heads removed in five layers (every head of enc_dec.0); dec_self.0 keeps its four.
    const std::map<std::string, torch::Tensor> values = {
        {"enc_self.0", torch::tensor({1.f, 0.f, 1.f, 0.f})},
        {"enc_self.1", torch::tensor({0.f, 1.f, 1.f, 1.f})},
        {"dec_self.1", torch::tensor({1.f, 0.f, 0.f, 0.f})},
        {"enc_dec.0", torch::tensor({0.f, 0.f, 0.f, 0.f})},
        {"enc_dec.1", torch::tensor({1.f, 1.f, 0.f, 1.f})}};
    // The third pass (every_layer) keeps enc_self.1's heads: its inputs drifted (enc_self.0 lost
    // two), so its refit moves it; every layer is refit.
    auto values_every = values;
    values_every.erase("enc_self.1");
    const std::pair<ReconstructMode, bool> passes[] = {{ReconstructMode::kSequential, false},
                                                       {ReconstructMode::kSequentialStream, false},
                                                       {ReconstructMode::kSequential, true}};
    for (const auto& [mode, every] : passes) {
      SCOPED_TRACE(fmt::format("{}{}", choice_name(mode), every ? ", every layer" : ""));
      auto pruned = prune::prune_heads(reference, every ? values_every : values);
      pruned->train();  // the pass switches to eval mode and back
      const auto untouched = projection(pruned->decoder_layers[0]->self_attn);
      std::map<std::string, torch::Tensor> before;  // every layer's [W^T; b^T] before the refit
      for (auto type : model::kAttentionTypes) {
        const auto attns = pruned->attention_layers(type);
        for (size_t i = 0; i < attns.size(); ++i)
          before[prune::HeadGatesImpl::key(type, static_cast<int>(i))] =
              projection(attns[i]).clone();
      }
      const auto refits = prune::reconstruct_sequential(pruned, reference, examples, 60,
                                                        torch::kCPU, 0.0, mode, every);
      ASSERT_EQ(refits.size(), every ? 6u : 5u);
      // In forward order: encoder layers, then each decoder layer's self- and cross-attention.
      std::vector<std::string> order;
      for (const auto& f : refits) order.push_back(f.layer);
      const std::vector<std::string> expected_order =
          every ? std::vector<std::string>{"enc_self.0", "enc_self.1", "dec_self.0",
                                           "enc_dec.0",  "dec_self.1", "enc_dec.1"}
                : std::vector<std::string>{"enc_self.0", "enc_self.1", "enc_dec.0", "dec_self.1",
                                           "enc_dec.1"};
      EXPECT_EQ(order, expected_order);
      for (const auto& f : refits) {
        EXPECT_LE(f.error_after, f.error_before * (1 + 1e-9)) << f.layer;  // least squares
        EXPECT_LT(f.relative_after(), 1.0) << f.layer;
      }
      EXPECT_TRUE(pruned->is_training());
      pruned->eval();
      if (every) {
        EXPECT_FALSE(torch::allclose(projection(pruned->encoder_layers[1]->self_attn),
                                     projection(reference->encoder_layers[1]->self_attn), 1e-3,
                                     1e-4));
      } else {
        EXPECT_TRUE(torch::equal(projection(pruned->decoder_layers[0]->self_attn), untouched));
      }
      if (mode == ReconstructMode::kSequential) {
        // Every refit layer: the least-squares map from the pruned model's kept head outputs
        // (its own forward, earlier layers refit) to the reference layer's output (its forward).
        const auto zp = recorded_head_outputs(pruned, examples);
        const auto zo = recorded_head_outputs(reference, examples);
        for (auto type : model::kAttentionTypes) {
          const auto p_attns = pruned->attention_layers(type);
          const auto r_attns = reference->attention_layers(type);
          for (size_t i = 0; i < p_attns.size(); ++i) {
            const auto key = prune::HeadGatesImpl::key(type, static_cast<int>(i));
            if (!values.count(key) && !every) continue;
            SCOPED_TRACE(key);
            const auto y = with_constant(zo.at(key)).matmul(projection(r_attns[i]));
            const auto x = zp.count(key) ? with_constant(zp.at(key))
                                         : torch::ones({y.size(0), 1}, torch::kDouble);
            const auto expected = std::get<0>(torch::linalg_lstsq(x, y, {}, {}));
            EXPECT_TRUE(torch::allclose(projection(p_attns[i]), expected, 1e-3, 1e-4))
                << (projection(p_attns[i]) - expected).abs().max().item<double>();
            // The recorded errors, from the outputs computed here: the kept heads through the
            // layer's W_o before the refit and after it, over the non-padding tokens.
            const auto f = std::find_if(refits.begin(), refits.end(),
                                        [&](const auto& r) { return r.layer == key; });
            ASSERT_NE(f, refits.end());
            const double yy = y.pow(2).sum().item<double>();
            const auto sq = [&](const torch::Tensor& s) {
              return (x.matmul(s) - y).pow(2).sum().item<double>();
            };
            EXPECT_EQ(f->heads, r_attns[i]->num_heads());
            EXPECT_EQ(f->heads_kept, p_attns[i]->num_heads());
            EXPECT_EQ(f->tokens, y.size(0));
            EXPECT_NEAR(f->target_sq, yy, 1e-6 * yy);
            EXPECT_NEAR(f->error_before, sq(before.at(key)), 1e-6 * yy);
            EXPECT_NEAR(f->error_after, sq(projection(p_attns[i])), 1e-6 * yy);
          }
        }
      } else {
        // Toward the residual stream: each checked layer's W_o and bias are the least-squares
        // fit of (reference sublayer output + reference stream - pruned stream) from the pruned
        // layer's kept head outputs, the streams computed here with the layers' own forward.
        std::vector<int64_t> idx(examples.size());
        std::iota(idx.begin(), idx.end(), int64_t{0});
        const auto b = data::collate(examples, idx, torch::kCPU);
        const auto bias = model::TransformerImpl::source_bias(b.src);
        const auto src_rows = b.src.reshape(-1).ne(data::kPadId).nonzero().squeeze(1);
        const auto tgt_rows = b.tgt_in.reshape(-1).ne(data::kPadId).nonzero().squeeze(1);
        // One attention sublayer of both models: checks the fit, returns both streams after it.
        const auto check = [&](model::MultiheadAttention ra, model::MultiheadAttention pa,
                               torch::nn::LayerNorm rn, torch::nn::LayerNorm pn,
                               const torch::Tensor& xo, const torch::Tensor& xp,
                               const torch::Tensor& mo, const torch::Tensor& mp,
                               const torch::Tensor& mask, const torch::Tensor& rows) {
          const auto qo = pre_norm ? rn(xo) : xo;
          const auto qp = pre_norm ? pn(xp) : xp;
          const auto ho = ra->forward(qo, mo.defined() ? mo : qo, mask);
          pa->set_record(true);
          const auto hp = pa->forward(qp, mp.defined() ? mp : qp, mask);
          pa->set_record(false);
          const auto h = pa->last_head_outputs();
          const auto z = h.permute({0, 2, 1, 3}).reshape({h.size(0) * h.size(2), -1});
          const auto target = ho + xo - xp;
          const auto expected = std::get<0>(torch::linalg_lstsq(
              with_constant(z.index_select(0, rows)),
              target.reshape({-1, c.d_model}).index_select(0, rows).to(torch::kDouble), {}, {}));
          EXPECT_TRUE(torch::allclose(projection(pa), expected, 1e-3, 1e-4))
              << (projection(pa) - expected).abs().max().item<double>();
          // The stream target differs from the layer-output target (the streams have drifted).
          EXPECT_GT((xo - xp).abs().max().item<double>(), 1e-3);
          return std::make_pair(pre_norm ? xo + ho : rn(xo + ho), pre_norm ? xp + hp : pn(xp + hp));
        };
        {
          SCOPED_TRACE("enc_self.1");
          const auto x0 = reference->embed_source(b.src);
          auto& r1 = reference->encoder_layers[1];
          auto& p1 = pruned->encoder_layers[1];
          check(r1->self_attn, p1->self_attn, r1->self_attn_norm, p1->self_attn_norm,
                reference->encoder_layers[0]->forward(x0, bias),
                pruned->encoder_layers[0]->forward(x0, bias), {}, {}, bias, src_rows);
        }
        {
          // dec_self.1, then enc_dec.1 on the streams after dec_self.1's sublayer.
          const auto mo = reference->encode(b.src).memory, mp = pruned->encode(b.src).memory;
          const auto y0 = reference->embed_target(b.tgt_in);
          const auto causal = model::causal_bias(b.tgt_in.size(1), torch::kCPU);
          auto& r1 = reference->decoder_layers[1];
          auto& p1 = pruned->decoder_layers[1];
          std::pair<torch::Tensor, torch::Tensor> after_self;
          {
            SCOPED_TRACE("dec_self.1");
            after_self = check(r1->self_attn, p1->self_attn, r1->self_attn_norm, p1->self_attn_norm,
                               reference->decoder_layers[0]->forward(y0, mo, causal, bias),
                               pruned->decoder_layers[0]->forward(y0, mp, causal, bias), {}, {},
                               causal, tgt_rows);
          }
          SCOPED_TRACE("enc_dec.1");
          check(r1->cross_attn, p1->cross_attn, r1->cross_attn_norm, p1->cross_attn_norm,
                after_self.first, after_self.second, mo, mp, bias, tgt_rows);
        }
      }
    }
  }
}

TEST(Fisher, RidgeSolveSolvesTheNormalEquationsWithoutPenalisingTheConstant) {
  torch::manual_seed(3);
  const auto x = with_constant(torch::randn({50, 4}, torch::kDouble));
  const auto y = torch::randn({50, 2}, torch::kDouble);
  const auto a = x.t().matmul(x), c = x.t().matmul(y);
  const double ridge = 0.1;
  const auto s = prune::ridge_solve(a, c, ridge);
  const double lambda = ridge * a.diagonal().slice(0, 0, 4).mean().item<double>();
  auto penalised = s.clone();
  penalised[4].zero_();
  EXPECT_LT((a.matmul(s) + lambda * penalised - c).abs().max().item<double>(), 1e-9);
  EXPECT_TRUE(torch::allclose(prune::ridge_solve(a, c, 0.0),
                              std::get<0>(torch::linalg_lstsq(x, y, {}, {})), 1e-9, 1e-9));
  EXPECT_THROW(prune::ridge_solve(a, c.slice(0, 0, 3), 0.0), Error);
}

TEST(Fisher, PruneCommandWritesTheRunFolderOfAnL0Run) {
  testing::TempDir dir;
  const auto base = train_tiny_model(dir, 40);
  Config c = tiny_run_config(dir, 64);
  c.prune.method = PruneMethod::kFisher;
  c.prune.init_from = base.string();
  c.prune.target_heads = 3;  // of 6 (1+1 layers of 2 heads, three types)
  c.prune.calibration_sentences = 32;
  c.train.eval_max_sentences = 8;
  train::TrainOptions o;
  o.init_from = base;
  // A Fisher run of `c` into dir/NAME; returns its pruning.json.
  const auto run_fisher = [&](const std::string& name) {
    o.run_dir = dir / name;
    fs::create_directories(o.run_dir);
    prune::fisher_prune_command(c, o);
    return nlohmann::json::parse(io::read_file(o.run_dir / "pruning.json"));
  };
  const auto p = run_fisher("fisher");
  const auto info = run::read_checkpoint_info(o.run_dir / "pruned");
  EXPECT_EQ(info.architecture.total(AttentionType::kEncSelf) +
                info.architecture.total(AttentionType::kDecSelf) +
                info.architecture.total(AttentionType::kEncDec),
            3);
  const auto rows = io::read_lines(o.run_dir / "head_removal.csv");
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0], "attention,layer,head,removal_step,fisher,kept,dev_bleu_at_removal");
  int ranked = 0;
  for (size_t i = 1; i < rows.size(); ++i) ranked += text::split(rows[i], ',')[3].empty() ? 0 : 1;
  EXPECT_EQ(ranked, 3);
  EXPECT_EQ(p["method"], "fisher");
  EXPECT_EQ(p["heads_before_e_d_de"], "2/2/2");
  EXPECT_LT(p["parameters_after"].get<int64_t>(), p["parameters_before"].get<int64_t>());
  EXPECT_LT(p["decode_flops_fraction"].get<double>(), 1.0);
  EXPECT_TRUE(fs::exists(o.run_dir / "summary.json"));
  EXPECT_TRUE(fs::exists(o.run_dir / "README.md"));
  // Each refit layer's errors are recorded, and read back as written.
  ASSERT_EQ(p["refits"].size(), p["layers_refit"].get<size_t>());
  for (const auto& f : p["refits"]) {
    EXPECT_LE(f["heads_kept"].get<int>(), f["heads"].get<int>());
    EXPECT_GT(f["tokens"].get<int>(), 0);
    EXPECT_NEAR(f["relative_error_after"].get<double>(),
                f["error_after"].get<double>() / f["target_sum_of_squares"].get<double>(), 1e-12);
  }
  EXPECT_NE(io::read_file(o.run_dir / "README.md").find("| layer | heads kept | tokens |"),
            std::string::npos);
  const auto read = prune::read_prune_outcome(o.run_dir);
  ASSERT_TRUE(read.fisher.has_value());
  ASSERT_EQ(read.fisher->refits.size(), p["refits"].size());
  for (size_t i = 0; i < read.fisher->refits.size(); ++i) {
    EXPECT_EQ(read.fisher->refits[i].layer, p["refits"][i]["layer"]);
    EXPECT_EQ(read.fisher->refits[i].error_before, p["refits"][i]["error_before"].get<double>());
  }
  // The pruned model loads and decodes.
  auto pruned = run::load_model(info, torch::kCPU);
  EXPECT_GT(pruned->parameters().size(), 0u);
  // A second call finds the run finished and leaves it alone.
  const auto stamp = fs::last_write_time(o.run_dir / "pruning.json");
  prune::fisher_prune_command(c, o);
  EXPECT_EQ(fs::last_write_time(o.run_dir / "pruning.json"), stamp);

  // A FLOPs budget: the pruned model's predicted decoding FLOPs stay within it.
  c.prune.target_heads = 0;
  c.prune.flops_fraction = 0.9;
  c.prune.reconstruct = false;
  const auto q = run_fisher("fisher-flops");
  EXPECT_LE(q["decode_flops_fraction"].get<double>(), 0.9 + 1e-9);
  EXPECT_EQ(q["layers_refit"].get<int>(), 0);
  EXPECT_TRUE(q["refits"].empty());

  // The one-pass refit: the same heads as the first run (same calibration and search, which
  // used the default sequential_stream refit), other W_o and biases.
  EXPECT_EQ(p["reconstruct_mode"], "sequential_stream");
  c.prune.flops_fraction = 0;
  c.prune.target_heads = 3;
  c.prune.reconstruct = true;
  c.prune.reconstruct_mode = ReconstructMode::kOnePass;
  const auto r = run_fisher("fisher-one-pass");
  EXPECT_EQ(r["reconstruct_mode"], "one_pass");
  EXPECT_EQ(r["layers_refit"], p["layers_refit"]);
  EXPECT_GT(r["layers_refit"].get<int>(), 0);
  ASSERT_EQ(r["refits"].size(), r["layers_refit"].get<size_t>());
  for (const auto& f : r["refits"])  // least squares from the Gram matrix: never worse
    EXPECT_LE(f["error_after"].get<double>(), f["error_before"].get<double>() * (1 + 1e-9));
  EXPECT_EQ(r["heads_after_e_d_de"], p["heads_after_e_d_de"]);
  EXPECT_EQ(io::read_file(o.run_dir / "head_removal.csv"),
            io::read_file(dir / "fisher" / "head_removal.csv"));
  auto sequential = run::load_model(info, torch::kCPU);
  auto one_pass = run::load_model(run::read_checkpoint_info(o.run_dir / "pruned"), torch::kCPU);
  bool differs = false;
  for (auto type : model::kAttentionTypes) {
    const auto a = one_pass->attention_layers(type), b = sequential->attention_layers(type);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i]->num_heads(), b[i]->num_heads());
      if (a[i]->num_heads() > 0) {
        EXPECT_TRUE(torch::equal(a[i]->in_proj_weight, b[i]->in_proj_weight));
      }
      differs = differs || !torch::equal(a[i]->out_proj_bias, b[i]->out_proj_bias);
    }
  }
  EXPECT_TRUE(differs);

  // A latency budget: the pruned model is timed after pruning and recorded beside the limit;
  // the fraction is the ratio of the two medians of the recorded times. (Timings of a model this
  // small are noise: the limit 1.0 is always feasible, whatever they say.)
  c.prune.target_heads = 0;
  c.prune.latency_fraction = 1.0;
  c.prune.reconstruct = false;
  const auto l = run_fisher("fisher-latency")["budget"];
  ASSERT_TRUE(l.contains("latency_fraction_measured")) << l.dump(2);
  auto median3 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.at(1);
  };
  const auto& times = l["latency_measured_seconds_per_token"];
  const auto full = times["full"].get<std::vector<double>>();
  const auto pruned_t = times["pruned"].get<std::vector<double>>();
  ASSERT_EQ(full.size(), 3u);
  ASSERT_EQ(pruned_t.size(), 3u);
  EXPECT_DOUBLE_EQ(l["latency_fraction_measured"].get<double>(), median3(pruned_t) / median3(full));
  EXPECT_EQ(l["latency_fraction"].get<double>(), 1.0);
}

TEST(Fisher, BudgetsAreCheckedWhenTheConfigLoads) {
  auto load = [](const std::vector<std::string>& sets) {
    ConfigLoader l;
    for (const auto& s : sets) l.apply_set(s);
    l.finish();
  };
  EXPECT_NE(
      testing::error_of([&] { load({"prune.method=fisher"}); }).find("needs exactly one budget"),
      std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              load({"prune.method=fisher", "prune.target_heads=10", "prune.flops_fraction=0.5"});
            }).find("2 are set"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              load({"prune.flops_fraction=0.5"});
            }).find("budgets of prune.method fisher"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              load({"prune.method=fisher", "prune.target_heads_per_type=[4, 4]"});
            }).find("three head counts"),
            std::string::npos);
  EXPECT_EQ(testing::error_of([&] {
              load({"prune.method=fisher", "prune.target_heads_per_type=[4, 48, 48]"});
            }),
            "(no error)");
  EXPECT_NE(testing::error_of([&] {
              load({"prune.method=fisher", "prune.target_heads=10",
                    "prune.reconstruct_mode=one_pass", "prune.reconstruct_every_layer=true"});
            }).find("needs prune.reconstruct on and a sequential prune.reconstruct_mode"),
            std::string::npos);
  // A refit without a ridge could meet a singular Gram matrix (a head that never fires).
  const auto no_ridge = testing::error_of([&] {
    load({"prune.method=fisher", "prune.target_heads=10", "prune.ridge=0"});
  });
  EXPECT_NE(no_ridge.find("prune.ridge: must be greater than 0"), std::string::npos) << no_ridge;
}

}  // namespace
}  // namespace headcount
