// Post-training Fisher head pruning (include/headcount/prune/fisher.h).
#include "headcount/prune/fisher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/text.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/model/architecture.h"
#include "headcount/model/parameters.h"
#include "headcount/prune/head_gates.h"
#include "headcount/prune/outcome.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/run_folder.h"

namespace headcount::prune {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct CalibLayer {
  std::string key;
  model::AttentionType type;
  model::MultiheadAttention attention{nullptr};
  torch::Tensor scale;  // [B, H] leaf of this batch
};

// The calibration sentences in batches of at most `max_tokens` (at least the longest sentence).
std::vector<std::vector<int64_t>> calibration_batches(const std::vector<data::Example>& examples,
                                                      int64_t max_tokens) {
  size_t longest = 0;
  for (const auto& e : examples) longest = std::max({longest, e.src.size() + 1, e.tgt.size() + 1});
  return data::make_batches(examples, std::max<int64_t>(max_tokens, static_cast<int64_t>(longest)),
                            1);
}

// Flat indices of the non-padding positions of `tokens` [B, L].
torch::Tensor query_rows(const torch::Tensor& tokens) {
  return tokens.reshape(-1).ne(data::kPadId).nonzero().squeeze(1);
}

// [Z, 1] for the rows `rows` of the head outputs `merged` [B, T, H*Dh] (the input of W_o),
// double on the CPU: a row of the least-squares design matrix per query token.
torch::Tensor design_rows(const torch::Tensor& merged, const torch::Tensor& rows) {
  // No heads: the constant column alone. device: cpu (the design matrix is a host-side double)
  if (merged.size(-1) == 0) return torch::ones({rows.size(0), 1}, torch::kDouble);
  auto z = merged.reshape({-1, merged.size(-1)}).index_select(0, rows).to(torch::kDouble).cpu();
  return torch::cat({z, torch::ones({z.size(0), 1}, z.options())}, 1);
}

// A layer's recorded head outputs [B, H, T, Dh] merged as its W_o reads them: [B, T, H*Dh].
torch::Tensor merged_heads(const torch::Tensor& out) {
  return out.transpose(1, 2).reshape({out.size(0), out.size(2), -1});
}

}  // namespace

CalibrationStats calibrate(model::Transformer& model, const std::vector<data::Example>& examples,
                           const std::vector<model::AttentionType>& types, int64_t max_tokens,
                           const torch::Device& device, bool with_gram) {
  HC_CHECK(!examples.empty(), "Fisher calibration needs at least one sentence");
  const bool was_training = model->is_training();
  model->eval();
  std::vector<CalibLayer> layers;
  for (auto type : types) {
    const auto attns = model->attention_layers(type);
    for (size_t i = 0; i < attns.size(); ++i) {
      if (attns[i]->num_heads() == 0) continue;
      layers.push_back({HeadGatesImpl::key(type, static_cast<int>(i)), type, attns[i], {}});
    }
  }
  // The accumulators are double on the host: each batch's gradients and design rows are copied
  // there (.cpu() below), so the sums over many batches do not depend on the device, and the
  // search, rearrangement and refit read them on the host.
  CalibrationStats stats;
  for (auto& l : layers) {
    const int64_t h = l.attention->num_heads();
    stats.fisher[l.key] = torch::zeros({h, h}, torch::kDouble);  // device: cpu (host accumulator)
    if (with_gram) {
      const int64_t n = h * l.attention->head_dim() + 1;
      stats.gram[l.key] = torch::zeros({n, n}, torch::kDouble);  // device: cpu (host accumulator)
    }
  }
  const auto batches = calibration_batches(examples, max_tokens);
  const auto start = Clock::now();
  size_t done = 0;
  for (const auto& idx : batches) {
    const data::Batch b = data::collate(examples, idx, device);
    const int64_t bsz = b.size();
    for (auto& l : layers) {
      l.scale = torch::ones({bsz, l.attention->num_heads()},
                            torch::TensorOptions().device(device).requires_grad(true));
      l.attention->set_head_scale(l.scale);
      l.attention->set_record(with_gram);
    }
    const auto logits = model->forward(b.src, b.tgt_in);
    const int64_t vocab = logits.size(-1);
    const auto token_loss =
        torch::nll_loss(torch::log_softmax(logits.reshape({-1, vocab}).to(torch::kFloat), -1),
                        b.tgt_out.reshape(-1), {}, at::Reduction::None, data::kPadId);
    // The sum of the sentences' losses: its gradient with respect to sentence s's mask copy is
    // dL_s/dm. Only the masks' gradients are computed: the weights' .grad stay as they were.
    std::vector<torch::Tensor> scales;
    for (const auto& l : layers) scales.push_back(l.scale);
    const auto grads = torch::autograd::grad({token_loss.sum()}, scales);
    for (size_t i = 0; i < layers.size(); ++i) {
      auto& l = layers[i];
      const auto g = grads[i].to(torch::kDouble).cpu();  // [B, H]
      stats.fisher[l.key] += g.t().matmul(g);
      if (with_gram) {
        const auto& queries = l.type == model::AttentionType::kEncSelf ? b.src : b.tgt_in;
        const auto x =
            design_rows(merged_heads(l.attention->last_head_outputs()), query_rows(queries));
        stats.gram[l.key] += x.t().matmul(x);
      }
    }
    stats.sentences += bsz;
    stats.tokens += b.tgt_tokens;
    ++done;
    if (done % 20 == 0 || done == batches.size()) {
      const double s = seconds_since(start);
      log::info("fisher: calibration {}/{} batches | {} sentences | {:.0f} target tok/s | ETA {}",
                done, batches.size(), stats.sentences, stats.tokens / std::max(s, 1e-9),
                log::duration(s / static_cast<double>(done) *
                              static_cast<double>(batches.size() - done)));
    }
  }
  for (auto& l : layers) {
    l.attention->set_head_scale({});
    l.attention->set_record(false);
    stats.fisher[l.key] /= static_cast<double>(stats.sentences);
  }
  if (was_training) model->train();
  return stats;
}

torch::Tensor ridge_solve(torch::Tensor a, const torch::Tensor& c, double ridge) {
  HC_CHECK(a.dim() == 2 && a.size(0) == a.size(1) && a.size(0) >= 1 && c.dim() == 2 &&
               c.size(0) == a.size(0),
           "ridge_solve: a Gram matrix of shape {} does not fit cross-products of shape {}",
           a.sizes(), c.sizes());
  a = a.to(torch::kDouble).cpu().clone();
  const int64_t k = a.size(0) - 1;
  if (k > 0 && ridge > 0) {
    const double lambda = ridge * a.diagonal().slice(0, 0, k).mean().item<double>();
    a.diagonal().slice(0, 0, k).add_(lambda);
  }
  return at::linalg_solve(a, c.to(torch::kDouble).cpu());
}

namespace {

// [W^T; b^T] of an output projection in double on the host ([k+1, D]; the bias alone for a
// layer left without heads, whose weight is undefined or has no columns).
torch::Tensor stacked_projection(const torch::Tensor& weight, const torch::Tensor& bias) {
  const auto b = bias.detach().to(torch::kDouble).cpu().unsqueeze(0);
  if (!weight.defined() || weight.size(1) == 0) return b;
  return torch::cat({weight.detach().to(torch::kDouble).cpu().t(), b}, 0);
}

}  // namespace

double residual_sum_of_squares(const torch::Tensor& a, const torch::Tensor& c, double yy,
                               const torch::Tensor& s) {
  const double cross = (s * c).sum().item<double>();
  const double fitted = (s * a.matmul(s)).sum().item<double>();
  return std::max(0.0, yy - 2 * cross + fitted);
}

std::pair<torch::Tensor, torch::Tensor> refit_output_projection(const torch::Tensor& gram,
                                                                const torch::Tensor& weight,
                                                                const torch::Tensor& bias,
                                                                const std::vector<bool>& keep,
                                                                double ridge, LayerRefit* fit) {
  const int64_t heads = static_cast<int64_t>(keep.size());
  const int64_t width = weight.size(1);
  HC_CHECK(heads > 0 && width % heads == 0 && gram.size(0) == width + 1,
           "refit: a Gram matrix of {} rows does not fit a projection of {} inputs and {} heads",
           gram.size(0), width, heads);
  const int64_t dh = width / heads;
  std::vector<int64_t> cols;
  for (int64_t h = 0; h < heads; ++h)
    if (keep[static_cast<size_t>(h)])
      for (int64_t d = 0; d < dh; ++d) cols.push_back(h * dh + d);
  const int64_t k = static_cast<int64_t>(cols.size());
  cols.push_back(width);                                 // the constant column
  const auto index = torch::tensor(cols, torch::kLong);  // device: cpu (indexes the host Gram)
  const auto g = gram.to(torch::kDouble).cpu();
  // The unpruned layer's output is [Z, 1] [W^T; b^T]: its cross-products with the kept inputs
  // come from the Gram matrix alone.
  const auto full = stacked_projection(weight, bias);  // [width+1, D]
  const auto a = g.index_select(0, index).index_select(1, index);
  const auto c = g.index_select(0, index).matmul(full);
  const auto sol = ridge_solve(a, c, ridge);  // [k+1, D]
  if (fit) {
    fit->heads = heads;
    fit->heads_kept = k / dh;
    fit->tokens = static_cast<int64_t>(std::llround(g[width][width].item<double>()));
    fit->target_sq = (full * g.matmul(full)).sum().item<double>();
    fit->error_before = residual_sum_of_squares(a, c, fit->target_sq, full.index_select(0, index));
    fit->error_after = residual_sum_of_squares(a, c, fit->target_sq, sol);
  }
  // device: cpu (filled from the host solution; converted to the weight's options on return)
  auto new_weight = torch::zeros({weight.size(0), width}, torch::kDouble);
  if (k > 0) new_weight.index_copy_(1, index.slice(0, 0, k), sol.slice(0, 0, k).t());
  const auto new_bias = sol[k];
  return {new_weight.to(weight.options()), new_bias.to(bias.options())};
}

namespace {

// One calibration batch of the sequential pass: both models' residual streams and what the
// layers need.
struct StreamBatch {
  torch::Tensor tgt_in, src_bias, self_bias;
  torch::Tensor src_rows, tgt_rows;  // flat indices of the non-padding positions
  torch::Tensor xo, xp;              // residual streams [B, L, D]: reference, pruned
  torch::Tensor mo, mp;              // encoder outputs [B, S, D]
};

// Both residual streams walked sublayer by sublayer over the calibration batches; the pruned
// model's attention layers refit on the way (reconstruct_sequential).
class SequentialPass {
 public:
  SequentialPass(model::Transformer& pruned, model::Transformer& reference, double ridge,
                 ReconstructMode mode, bool every_layer)
      : pruned_(pruned),
        reference_(reference),
        ridge_(ridge),
        mode_(mode),
        every_layer_(every_layer),
        pre_(reference->config().pre_norm),
        width_(reference->config().d_model) {}

  // The embedded sources of both models, per batch.
  void embed(const std::vector<data::Example>& examples, int64_t max_tokens,
             const torch::Device& device) {
    for (const auto& idx : calibration_batches(examples, max_tokens)) {
      const data::Batch b = data::collate(examples, idx, device);
      StreamBatch s;
      s.tgt_in = b.tgt_in;
      s.src_bias = model::TransformerImpl::source_bias(b.src);
      s.self_bias = model::causal_bias(b.tgt_in.size(1), device);
      s.src_rows = query_rows(b.src);
      s.tgt_rows = query_rows(b.tgt_in);
      s.xo = reference_->embed_source(b.src);
      s.xp = pruned_->embed_source(b.src);
      batches_.push_back(std::move(s));
    }
  }

  // Every layer in forward order; returns the refit attention layers' errors.
  std::vector<LayerRefit> run() {
    using model::AttentionType;
    for (size_t l = 0; l < reference_->encoder_layers.size(); ++l) {
      auto& r = reference_->encoder_layers[l];
      auto& p = pruned_->encoder_layers[l];
      attention({r->self_attn, p->self_attn, r->self_attn_norm, p->self_attn_norm, true, true,
                 key(AttentionType::kEncSelf, l)});
      feed_forward_both(r, p);
    }
    for (auto& s : batches_) {
      s.mo = reference_->finish_encoder(s.xo);
      s.mp = pruned_->finish_encoder(s.xp);
      s.xo = reference_->embed_target(s.tgt_in);
      s.xp = pruned_->embed_target(s.tgt_in);
    }
    for (size_t l = 0; l < reference_->decoder_layers.size(); ++l) {
      auto& r = reference_->decoder_layers[l];
      auto& p = pruned_->decoder_layers[l];
      attention({r->self_attn, p->self_attn, r->self_attn_norm, p->self_attn_norm, false, true,
                 key(AttentionType::kDecSelf, l)});
      attention({r->cross_attn, p->cross_attn, r->cross_attn_norm, p->cross_attn_norm, false, false,
                 key(AttentionType::kEncDec, l)});
      feed_forward_both(r, p);
    }
    return refits_;
  }

 private:
  static std::string key(model::AttentionType type, size_t layer) {
    return HeadGatesImpl::key(type, static_cast<int>(layer));
  }

  // One attention sublayer of both models: reference (r) and pruned (p).
  struct Sublayer {
    model::MultiheadAttention ra, pa;
    torch::nn::LayerNorm rn, pn;
    bool encoder, self;
    std::string key;  // "enc_self.0"
  };

  // The sublayer's f (before the residual), through the model's own attention and norm placement.
  torch::Tensor forward(Sublayer& l, StreamBatch& s, bool ref,
                        model::AttentionTrace* trace = nullptr) {
    const auto q = model::sublayer_input(*(ref ? l.rn : l.pn), ref ? s.xo : s.xp, pre_);
    const auto& bias = l.encoder || !l.self ? s.src_bias : s.self_bias;
    const auto& memory = l.self ? q : (ref ? s.mo : s.mp);
    return (ref ? l.ra : l.pa)->forward(q, memory, bias, nullptr, trace);
  }

  // Refits `l.pa` when it has lost heads (or always, every_layer_), then moves both streams past
  // the sublayer.
  void attention(Sublayer l) {
    std::vector<torch::Tensor> ho;
    for (auto& s : batches_) ho.push_back(forward(l, s, true));
    // The pruned layer's merged head outputs per batch, kept to apply the refit W_o to them.
    std::vector<torch::Tensor> zp;
    if (every_layer_ || l.pa->num_heads() < l.ra->num_heads()) zp = refit(l, ho);
    for (size_t i = 0; i < batches_.size(); ++i) {
      auto& s = batches_[i];
      // A refit layer's new output from its recorded heads, as its forward computes it.
      const auto hp = zp.empty() || l.pa->num_heads() == 0
                          ? forward(l, s, false)
                          : torch::linear(zp[i], l.pa->out_proj_weight, l.pa->out_proj_bias);
      s.xo = model::sublayer_output(*l.rn, s.xo, ho[i], pre_);
      s.xp = model::sublayer_output(*l.pn, s.xp, hp, pre_);
    }
  }

  // The ridge refit of `l.pa`'s W_o and bias toward the reference outputs `ho` (its errors
  // before and after added to refits_); returns the pruned layer's merged head outputs per batch.
  std::vector<torch::Tensor> refit(Sublayer& l, const std::vector<torch::Tensor>& ho) {
    auto& pa = l.pa;
    const int64_t k = pa->num_heads() * pa->head_dim();
    // Normal equations in double on the host, as in calibrate(): z and y are copied there.
    auto a = torch::zeros({k + 1, k + 1}, torch::kDouble);   // device: cpu (host accumulator)
    auto c = torch::zeros({k + 1, width_}, torch::kDouble);  // device: cpu (host accumulator)
    LayerRefit fit{l.key, pa->num_heads(), l.ra->num_heads()};
    std::vector<torch::Tensor> zp;
    for (size_t i = 0; i < batches_.size(); ++i) {
      auto& s = batches_[i];
      const auto& rows = l.encoder ? s.src_rows : s.tgt_rows;
      model::AttentionTrace trace;
      forward(l, s, false, &trace);
      zp.push_back(k > 0 ? trace.heads : s.xp.new_empty({s.xp.size(0), s.xp.size(1), 0}));
      const auto z = design_rows(zp.back(), rows);
      auto y = mode_ == ReconstructMode::kSequentialStream ? ho[i] + s.xo - s.xp : ho[i];
      y = y.reshape({-1, width_}).index_select(0, rows).to(torch::kDouble).cpu();
      a += z.t().matmul(z);
      c += z.t().matmul(y);
      fit.tokens += rows.numel();
      fit.target_sq += y.pow(2).sum().item<double>();
    }
    const auto sol = ridge_solve(a, c, ridge_);  // [k+1, D]
    fit.error_before = residual_sum_of_squares(
        a, c, fit.target_sq, stacked_projection(pa->out_proj_weight, pa->out_proj_bias));
    fit.error_after = residual_sum_of_squares(a, c, fit.target_sq, sol);
    if (k > 0)  // a layer left without heads has no W_o, only its bias
      pa->out_proj_weight.copy_(sol.slice(0, 0, k).t().to(pa->out_proj_weight.options()));
    pa->out_proj_bias.copy_(sol[k].to(pa->out_proj_bias.options()));
    refits_.push_back(fit);
    return zp;
  }

  template <typename Layer>
  void feed_forward_both(Layer& r, Layer& p) {
    for (auto& s : batches_) {
      s.xo = r->feed_forward_block(s.xo);
      s.xp = p->feed_forward_block(s.xp);
    }
  }

  model::Transformer& pruned_;
  model::Transformer& reference_;
  const double ridge_;
  const ReconstructMode mode_;
  const bool every_layer_;
  const bool pre_;
  const int64_t width_;
  std::vector<StreamBatch> batches_;
  std::vector<LayerRefit> refits_;
};

// `pruned` has the layers of `reference`, each with at most its heads of the same width.
void check_pruned_copy(model::Transformer& pruned, model::Transformer& reference) {
  HC_CHECK(pruned->encoder_layers.size() == reference->encoder_layers.size() &&
               pruned->decoder_layers.size() == reference->decoder_layers.size(),
           "sequential reconstruction: the pruned model has other layers than the reference");
  for (auto type : model::kAttentionTypes) {
    const auto p = pruned->attention_layers(type), r = reference->attention_layers(type);
    for (size_t i = 0; i < p.size(); ++i)
      HC_CHECK(p[i]->num_heads() <= r[i]->num_heads() && p[i]->head_dim() == r[i]->head_dim() &&
                   p[i]->d_model() == r[i]->d_model(),
               "sequential reconstruction: {} of the pruned model ({} heads of {}) is not a "
               "pruned copy of the reference's ({} heads of {})",
               HeadGatesImpl::key(type, static_cast<int>(i)), p[i]->num_heads(), p[i]->head_dim(),
               r[i]->num_heads(), r[i]->head_dim());
  }
}

}  // namespace

std::vector<LayerRefit> reconstruct_sequential(model::Transformer& pruned,
                                               model::Transformer& reference,
                                               const std::vector<data::Example>& examples,
                                               int64_t max_tokens, const torch::Device& device,
                                               double ridge, ReconstructMode mode,
                                               bool every_layer) {
  HC_CHECK(mode != ReconstructMode::kOnePass, "reconstruct_sequential: mode one_pass");
  HC_CHECK(!examples.empty(), "sequential reconstruction needs at least one sentence");
  check_pruned_copy(pruned, reference);
  torch::NoGradGuard no_grad;
  const bool pruned_training = pruned->is_training(), reference_training = reference->is_training();
  pruned->eval();
  reference->eval();
  SequentialPass pass(pruned, reference, ridge, mode, every_layer);
  pass.embed(examples, max_tokens, device);
  auto refits = pass.run();
  if (pruned_training) pruned->train();
  if (reference_training) reference->train();
  return refits;
}

std::map<model::AttentionType, int64_t> search_counts(
    const std::map<model::AttentionType, std::vector<double>>& scores, const SearchBudget& budget) {
  // Per type: cumulative cost of removing its r lowest-scored heads.
  std::vector<model::AttentionType> types;
  std::vector<std::vector<double>> removed_cost;
  for (const auto& [type, s] : scores) {
    std::vector<double> sorted = s;
    std::sort(sorted.begin(), sorted.end());
    std::vector<double> prefix(sorted.size() + 1, 0.0);
    for (size_t i = 0; i < sorted.size(); ++i) prefix[i + 1] = prefix[i] + sorted[i];
    types.push_back(type);
    removed_cost.push_back(prefix);
  }
  std::map<model::AttentionType, int64_t> best;
  double best_loss = std::numeric_limits<double>::infinity();
  int64_t best_kept = -1;
  std::vector<int64_t> k(types.size(), 0);
  // Odometer over every (k_t), k_t in 0..n_t.
  for (;;) {
    bool ok = true;
    int64_t kept = 0;
    double cost = budget.fixed, loss = 0;
    for (size_t i = 0; i < types.size(); ++i) {
      const int64_t n = static_cast<int64_t>(removed_cost[i].size()) - 1;
      kept += k[i];
      loss += removed_cost[i][static_cast<size_t>(n - k[i])];
      const auto c = budget.cost.find(types[i]);
      cost += static_cast<double>(k[i]) * (c == budget.cost.end() ? 0.0 : c->second);
      const auto e = budget.exact_per_type.find(types[i]);
      if (e != budget.exact_per_type.end() && e->second != k[i]) ok = false;
    }
    if (budget.exact_total >= 0) {
      ok = ok && kept == budget.exact_total;
    } else if (budget.exact_per_type.empty()) {
      ok = ok && cost <= budget.limit * (1 + 1e-12);
    }
    if (ok && (loss < best_loss || (loss == best_loss && kept > best_kept))) {
      best_loss = loss;
      best_kept = kept;
      for (size_t i = 0; i < types.size(); ++i) best[types[i]] = k[i];
    }
    size_t i = 0;
    for (; i < types.size(); ++i) {
      if (k[i] + 1 < static_cast<int64_t>(removed_cost[i].size())) {
        ++k[i];
        break;
      }
      k[i] = 0;
    }
    if (i == types.size()) break;
  }
  HC_CHECK(best_kept >= 0,
           "no choice of heads meets the budget (fixed cost {:.4g}, limit {:.4g}, exact total {}): "
           "the budget is below what the model costs with no prunable head at all",
           budget.fixed, budget.limit, budget.exact_total);
  return best;
}

std::vector<bool> rearrange_layer(const torch::Tensor& fisher_block,
                                  const std::vector<bool>& start) {
  const auto f = fisher_block.to(torch::kDouble).cpu().contiguous();
  const int64_t h = f.size(0);
  HC_CHECK(f.dim() == 2 && f.size(1) == h && static_cast<int64_t>(start.size()) == h,
           "rearrange: a Fisher block of shape {} does not fit a layer of {} heads", f.sizes(),
           start.size());
  const auto keep = static_cast<int64_t>(std::count(start.begin(), start.end(), true));
  const double* p = f.data_ptr<double>();
  auto removed_loss = [&](const std::vector<bool>& kept) {
    double s = 0;
    for (int64_t i = 0; i < h; ++i) {
      if (kept[static_cast<size_t>(i)]) continue;
      for (int64_t j = 0; j < h; ++j)
        if (!kept[static_cast<size_t>(j)]) s += p[i * h + j];
    }
    return s;
  };
  // Another subset replaces the best so far only when it is better beyond rounding: on ties
  // the search's own choice stays.
  auto better = [](double l, double best) { return l < best - 1e-12 * std::abs(best); };
  std::vector<bool> best = start;
  double best_loss = removed_loss(start);
  double subsets = 1;
  for (int64_t i = 0; i < keep; ++i)
    subsets = subsets * static_cast<double>(h - i) / static_cast<double>(i + 1);
  if (subsets <= 20000) {
    // Every subset of size `keep`, as a selection mask permuted lexicographically.
    std::vector<bool> sel(static_cast<size_t>(h), false);
    std::fill(sel.begin(), sel.begin() + keep, true);
    do {
      const double l = removed_loss(sel);
      if (better(l, best_loss)) best_loss = l, best = sel;
    } while (std::prev_permutation(sel.begin(), sel.end()));
    return best;
  }
  // Local search from the search's choice: the best swap of a kept and a removed head, while one
  // lowers the loss (never worse than the start).
  for (;;) {
    int64_t in = -1, out = -1;
    double step_loss = best_loss;
    for (int64_t i = 0; i < h; ++i) {
      if (!best[static_cast<size_t>(i)]) continue;
      for (int64_t j = 0; j < h; ++j) {
        if (best[static_cast<size_t>(j)]) continue;
        best[static_cast<size_t>(i)] = false, best[static_cast<size_t>(j)] = true;
        const double l = removed_loss(best);
        best[static_cast<size_t>(i)] = true, best[static_cast<size_t>(j)] = false;
        if (better(l, step_loss)) step_loss = l, in = j, out = i;
      }
    }
    if (in < 0) return best;
    best[static_cast<size_t>(out)] = false, best[static_cast<size_t>(in)] = true;
    best_loss = step_loss;
  }
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::map<std::string, torch::Tensor> values_without(const model::Architecture& arch,
                                                    model::AttentionType type) {
  std::map<std::string, torch::Tensor> values;
  const auto& heads = arch.heads(type);
  for (size_t i = 0; i < heads.size(); ++i)
    if (heads[i] > 0)
      // device: cpu (gate values are read on the host by prune_heads)
      values[HeadGatesImpl::key(type, static_cast<int>(i))] = torch::zeros({heads[i]});
  return values;
}

// One prunable head and its diagonal Fisher.
struct Head {
  model::AttentionType type;
  int layer;
  int64_t head;
  double fisher;
};

// The search budget and its record in pruning.json.
struct Budget {
  SearchBudget search;
  nlohmann::ordered_json json;
};

// Keep flags per layer key.
using KeepMap = std::map<std::string, std::vector<bool>>;

// What stages 1 to 5 leave.
struct PruneResult {
  CalibrationStats stats;
  std::vector<Head> all;  // every prunable head
  Budget budget;
  KeepMap keep;
  int rearranged = 0;
  std::vector<LayerRefit> refits;
  model::Transformer pruned{nullptr};
};

// A post-training method beside the TrainingExtension: it loads the run's inputs through the
// library (train::load_training_inputs), never trains, and writes the run folder's records through
// prune/outcome.h. The steps of run() follow the stages of fisher.h.
class FisherPruning {
 public:
  FisherPruning(Config config, train::TrainOptions options)
      : config_(std::move(config)), options_(std::move(options)), folder_{options_.run_dir} {}
  void run();

 private:
  bool finished() const;
  void start();
  train::EvalResult evaluate_unpruned();
  PruneResult prune_model();
  std::vector<data::Example> calibration_sentences() const;
  std::vector<Head> head_scores(const CalibrationStats& stats) const;
  Budget make_budget(const std::vector<Head>& all);
  Budget head_count_budget(const std::vector<Head>& all) const;
  Budget cost_budget();
  // Decoding seconds of the full model (`total`) and of it without each gated type's heads.
  nlohmann::ordered_json measure_latency(std::map<model::AttentionType, double>& without,
                                         double& total);
  void measure_achieved_latency(model::Transformer& pruned, Budget& budget);
  KeepMap keep_top(const std::vector<Head>& all, const SearchBudget& budget) const;
  int rearrange(KeepMap& keep, const CalibrationStats& stats) const;
  std::vector<LayerRefit> refit_one_pass(const KeepMap& keep, const CalibrationStats& stats);
  model::Transformer build_pruned(const KeepMap& keep, const std::vector<data::Example>& calib,
                                  std::vector<LayerRefit>& refits);
  train::EvalResult evaluate_pruned(model::Transformer& pruned);
  std::string write_head_removal(const std::vector<Head>& all, const KeepMap& keep,
                                 double& removed_fisher) const;
  PruneOutcome outcome(const PruneResult& r, double removed_fisher) const;
  void write_records(const PruneOutcome& o, const std::string& csv);

  std::vector<std::vector<int>> latency_sources() const;
  // Three rounds of decoding `sources` by each model in turn (after one warm-up decode by each):
  // seconds per output token, per model and round.
  std::vector<std::vector<double>> alternating_seconds(
      std::vector<model::Transformer> models, const std::vector<std::vector<int>>& sources);
  // Seconds per output token of decoding `sources`.
  double decode_seconds(model::Transformer& m, const std::vector<std::vector<int>>& sources);
  double decode_flops(const model::Architecture& a) const;

  const Config config_;
  const train::TrainOptions options_;
  const run::RunFolder folder_;
  train::TrainingInputs inputs_;
  std::vector<model::AttentionType> types_;  // gated
  model::Architecture before_;
  int64_t params_before_ = 0;
  std::vector<int64_t> src_len_, out_len_;  // of the first 500 dev sentences, for decode FLOPs
  FisherSeconds seconds_;
  double dev_bleu_start_ = 0, dev_bleu_end_ = 0;
};

bool FisherPruning::finished() const {
  std::error_code ec;
  if (!fs::exists(folder_.summary(), ec)) return false;
  log::info("{} is finished (summary.json): nothing to do", options_.run_dir.string());
  return true;
}

void FisherPruning::start() {
  inputs_ = train::load_training_inputs(config_, options_);
  // An unfinished run starts over (minutes): its event log first, so that the folder is a run's
  // before config.yaml is.
  io::write_file_atomic(folder_.metrics(), "");
  save_config(config_, folder_.config());
  types_ = gated_types(config_.prune);
  before_ = inputs_.model->architecture();
  params_before_ = model::parameter_count(*inputs_.model);
  for (size_t i = 0; i < inputs_.dev.size() && i < 500; ++i) {
    src_len_.push_back(static_cast<int64_t>(inputs_.dev[i].src.size()) + 1);
    out_len_.push_back(static_cast<int64_t>(inputs_.dev[i].tgt.size()) + 1);
  }
}

void FisherPruning::run() {
  if (finished()) return;
  start();
  dev_bleu_start_ = evaluate_unpruned().bleu;
  const auto t_all = Clock::now();
  PruneResult r = prune_model();
  seconds_.pruning = seconds_since(t_all);
  log::info("fisher: heads {} -> {} in {:.1f} s (calibration {:.1f} s on {} sentences)",
            before_.summary(), r.pruned->architecture().summary(), seconds_.pruning,
            seconds_.calibration, r.stats.sentences);
  if (config_.prune.latency_fraction > 0) measure_achieved_latency(r.pruned, r.budget);
  dev_bleu_end_ = evaluate_pruned(r.pruned).bleu;
  double removed_fisher = 0;
  const std::string csv = write_head_removal(r.all, r.keep, removed_fisher);
  write_records(outcome(r, removed_fisher), csv);
}

PruneResult FisherPruning::prune_model() {
  const auto& p = config_.prune;
  PruneResult r;
  // 1. Calibration.
  const auto calib = calibration_sentences();
  const bool one_pass_refit = p.reconstruct && p.reconstruct_mode == ReconstructMode::kOnePass;
  auto t = Clock::now();
  r.stats = calibrate(inputs_.model, calib, types_, config_.train.max_tokens, inputs_.device,
                      one_pass_refit);
  seconds_.calibration = seconds_since(t);
  // 2. Budget and search.
  t = Clock::now();
  r.all = head_scores(r.stats);
  r.budget = make_budget(r.all);
  r.keep = keep_top(r.all, r.budget.search);
  seconds_.search = seconds_since(t);
  // 3. Rearrangement within layers.
  t = Clock::now();
  r.rearranged = rearrange(r.keep, r.stats);
  seconds_.rearrange = seconds_since(t);
  // 4. Reconstruction of every layer that lost a head (one pass; sequential in build_pruned).
  t = Clock::now();
  if (one_pass_refit) r.refits = refit_one_pass(r.keep, r.stats);
  seconds_.reconstruct = seconds_since(t);
  // 5. The physically smaller model.
  r.pruned = build_pruned(r.keep, calib, r.refits);
  for (const auto& f : r.refits)
    log::info("fisher: refit {} ({} of {} heads): relative error {:.4f} -> {:.4f} over {} tokens",
              f.layer, f.heads_kept, f.heads, f.relative_before(), f.relative_after(), f.tokens);
  return r;
}

train::EvalResult FisherPruning::evaluate_unpruned() {
  // Not part of the pruning time.
  const auto t = Clock::now();
  const auto r = train::evaluate_dev(inputs_.model, inputs_, config_);
  seconds_.dev_evaluations += seconds_since(t);
  run::append_jsonl(folder_.metrics(), nlohmann::json{{"event", "eval"},
                                                      {"step", 0},
                                                      {"dev_loss", r.loss},
                                                      {"dev_bleu", r.bleu},
                                                      {"dev_chrf", r.chrf}});
  log::info("fisher: unpruned dev BLEU {:.2f} chrF {:.2f} ({} sentences)", r.bleu, r.chrf,
            r.sentences);
  return r;
}

// N training pairs drawn with the run's seed.
std::vector<data::Example> FisherPruning::calibration_sentences() const {
  const auto& p = config_.prune;
  std::vector<size_t> order(inputs_.train.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(static_cast<uint64_t>(config_.seed));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<data::Example> calib;
  for (size_t i = 0;
       i < order.size() && calib.size() < static_cast<size_t>(p.calibration_sentences); ++i)
    calib.push_back(inputs_.train[order[i]]);
  if (calib.size() < static_cast<size_t>(p.calibration_sentences))
    log::warn("fisher: prune.calibration_sentences is {}, the training set has {}",
              p.calibration_sentences, calib.size());
  return calib;
}

std::vector<Head> FisherPruning::head_scores(const CalibrationStats& stats) const {
  std::vector<Head> all;
  for (auto type : types_) {
    const auto& heads = before_.heads(type);
    for (size_t l = 0; l < heads.size(); ++l) {
      if (heads[l] == 0) continue;
      const auto diag = stats.fisher.at(HeadGatesImpl::key(type, static_cast<int>(l))).diagonal();
      for (int64_t h = 0; h < heads[l]; ++h)
        all.push_back({type, static_cast<int>(l), h, diag[h].item<double>()});
    }
  }
  HC_CHECK(!all.empty(), "prune.attention ({}) names no attention type with heads",
           fmt::join(config_.prune.attention, ", "));
  return all;
}

Budget FisherPruning::make_budget(const std::vector<Head>& all) {
  const auto& p = config_.prune;
  if (p.target_heads > 0 || !p.target_heads_per_type.empty()) return head_count_budget(all);
  return cost_budget();
}

// prune.target_heads, or prune.target_heads_per_type.
Budget FisherPruning::head_count_budget(const std::vector<Head>& all) const {
  const auto& p = config_.prune;
  Budget budget;
  if (p.target_heads > 0) {
    budget.search.exact_total = p.target_heads;
    HC_CHECK(p.target_heads <= static_cast<int64_t>(all.size()),
             "prune.target_heads is {}, but the gated types ({}) have {} heads", p.target_heads,
             fmt::join(p.attention, ", "), all.size());
    budget.json = {{"target_heads", p.target_heads}};
    return budget;
  }
  const model::AttentionType order3[] = {model::AttentionType::kEncSelf,
                                         model::AttentionType::kDecSelf,
                                         model::AttentionType::kEncDec};
  for (size_t i = 0; i < 3; ++i) {
    const auto n = static_cast<int64_t>(p.target_heads_per_type[i]);
    const bool gated = std::find(types_.begin(), types_.end(), order3[i]) != types_.end();
    HC_CHECK(gated ? n <= before_.total(order3[i]) : n == before_.total(order3[i]),
             "prune.target_heads_per_type: {} {} heads, but the model has {}{}", n,
             model::attention_name(order3[i]), before_.total(order3[i]),
             gated ? "" : " and the type is not in prune.attention (it keeps them all)");
    if (gated) budget.search.exact_per_type[order3[i]] = n;
  }
  budget.json = {{"target_heads_per_type", p.target_heads_per_type}};
  return budget;
}

// A linear cost per head of each gated type: FLOPs by formula, or latency measured here.
Budget FisherPruning::cost_budget() {
  const auto& p = config_.prune;
  const bool latency = p.latency_fraction > 0;
  std::map<model::AttentionType, double> without;
  double total = 0;
  nlohmann::ordered_json latency_json;
  if (!latency) {
    total = decode_flops(before_);
    for (auto type : types_) {
      model::Architecture a = before_;
      for (auto& n : a.heads(type)) n = 0;
      without[type] = decode_flops(a);
    }
  } else {
    latency_json = measure_latency(without, total);
  }
  Budget budget;
  double fixed = total;
  for (auto type : types_) {
    const auto n = static_cast<double>(before_.total(type));
    budget.search.cost[type] = std::max(0.0, (total - without[type]) / n);
    fixed -= budget.search.cost[type] * n;
  }
  budget.search.fixed = fixed;
  const double fraction = latency ? p.latency_fraction : p.flops_fraction;
  budget.search.limit = fraction * total;
  budget.json = {{latency ? "latency_fraction" : "flops_fraction", fraction},
                 {"total", total},
                 {"fixed", fixed},
                 {"limit", budget.search.limit}};
  for (const auto& [type, c] : budget.search.cost)
    budget.json[fmt::format("cost_per_{}_head", model::attention_name(type))] = c;
  if (latency) budget.json["latency_measurement"] = latency_json;
  return budget;
}

nlohmann::ordered_json FisherPruning::measure_latency(
    std::map<model::AttentionType, double>& without, double& total) {
  torch::NoGradGuard no_grad;
  auto& model = inputs_.model;
  const auto sources = latency_sources();
  std::vector<model::Transformer> models = {model};
  for (auto type : types_) models.push_back(prune_heads(model, values_without(before_, type)));
  const auto times = alternating_seconds(models, sources);
  std::vector<double> full_t = times[0];
  std::map<model::AttentionType, std::vector<double>> var_t;
  for (size_t i = 0; i < types_.size(); ++i) var_t[types_[i]] = times[i + 1];
  // Seconds per output token, scaled to the full model's output.
  size_t full_tokens = 0;
  auto options = decode::SearchOptions::from(config_.decode);
  for (const auto& o :
       decode::translate_ids(model, sources, options, config_.decode.batch_size, inputs_.device))
    full_tokens += o.size() + 1;
  for (auto& x : full_t) x *= static_cast<double>(full_tokens);
  for (auto& [type, v] : var_t)
    for (auto& x : v) x *= static_cast<double>(full_tokens);
  total = median(full_t);
  for (auto type : types_) without[type] = median(var_t[type]);
  for (auto type : types_)
    if (without[type] >= total)
      log::warn(
          "fisher: decoding without the {} heads measured no faster ({:.3f} s against "
          "{:.3f} s): their latency cost is taken as 0",
          model::attention_name(type), without[type], total);
  nlohmann::ordered_json json = {
      {"sentences", sources.size()},
      {"beam", config_.decode.beam},
      {"full_output_tokens", full_tokens},
      {"note", "seconds per output token x the full model's output tokens"},
      {"full_seconds", total},
      {"full_seconds_runs", full_t}};
  for (auto type : types_)
    json[fmt::format("without_{}_seconds", model::attention_name(type))] = without[type];
  return json;
}

// The latency model is linear in each type's heads, but a layer's fixed costs (its projections'
// launches, the cache, the memory's keys and values) go only with its last head, so the pruned
// model can decode slower than the limit: measured here as the costs were (alternating with the
// full model, median of three, seconds per output token) and recorded beside the limit.
void FisherPruning::measure_achieved_latency(model::Transformer& pruned, Budget& budget) {
  torch::NoGradGuard no_grad;
  const auto times = alternating_seconds({inputs_.model, pruned}, latency_sources());
  const auto &full_t = times[0], &pruned_t = times[1];
  const double fraction = median(pruned_t) / median(full_t);
  const double limit = config_.prune.latency_fraction;
  budget.json["latency_fraction_measured"] = fraction;
  budget.json["latency_measured_seconds_per_token"] = {{"full", full_t}, {"pruned", pruned_t}};
  if (fraction > limit)
    log::warn(
        "fisher: the pruned model decodes in {:.3f} of the full model's time per output token, "
        "above prune.latency_fraction {} (the per-head latency model is linear; a layer's fixed "
        "costs go only with its last head): lower prune.latency_fraction to meet it",
        fraction, limit);
  else
    log::info(
        "fisher: the pruned model decodes in {:.3f} of the full model's time per output "
        "token (prune.latency_fraction {})",
        fraction, limit);
}

// Heads kept by the diagonal search: the top k_t of each type.
KeepMap FisherPruning::keep_top(const std::vector<Head>& all, const SearchBudget& budget) const {
  std::map<model::AttentionType, std::vector<double>> scores;
  for (const auto& h : all) scores[h.type].push_back(h.fisher);
  const auto counts = search_counts(scores, budget);
  KeepMap keep;
  for (auto type : types_) {
    std::vector<const Head*> of_type;
    for (const auto& h : all)
      if (h.type == type) of_type.push_back(&h);
    std::stable_sort(of_type.begin(), of_type.end(),
                     [](const Head* a, const Head* b) { return a->fisher > b->fisher; });
    for (const auto* h : of_type) {
      auto& k = keep[HeadGatesImpl::key(h->type, h->layer)];
      if (k.empty()) k.assign(static_cast<size_t>(before_.heads(type)[h->layer]), false);
    }
    for (int64_t i = 0; i < counts.at(type); ++i) {
      const auto* h = of_type[static_cast<size_t>(i)];
      keep[HeadGatesImpl::key(h->type, h->layer)][static_cast<size_t>(h->head)] = true;
    }
  }
  return keep;
}

int FisherPruning::rearrange(KeepMap& keep, const CalibrationStats& stats) const {
  int rearranged = 0;
  if (!config_.prune.rearrange) return rearranged;
  for (auto& [key, k] : keep) {
    auto r = rearrange_layer(stats.fisher.at(key), k);
    if (r != k) ++rearranged, k = r;
  }
  return rearranged;
}

std::vector<LayerRefit> FisherPruning::refit_one_pass(const KeepMap& keep,
                                                      const CalibrationStats& stats) {
  torch::NoGradGuard no_grad;
  std::vector<LayerRefit> refits;
  for (auto type : types_) {
    const auto attns = inputs_.model->attention_layers(type);
    for (size_t l = 0; l < attns.size(); ++l) {
      const auto key = HeadGatesImpl::key(type, static_cast<int>(l));
      const auto it = keep.find(key);
      if (it == keep.end() ||
          std::all_of(it->second.begin(), it->second.end(), [](bool b) { return b; }))
        continue;
      LayerRefit fit{key};
      auto [w, b] =
          refit_output_projection(stats.gram.at(key), attns[l]->out_proj_weight,
                                  attns[l]->out_proj_bias, it->second, config_.prune.ridge, &fit);
      attns[l]->out_proj_weight.copy_(w);
      attns[l]->out_proj_bias.copy_(b);
      refits.push_back(fit);
    }
  }
  return refits;
}

// Refit layer by layer from its own inputs when sequential; saved as RUN/pruned.
model::Transformer FisherPruning::build_pruned(const KeepMap& keep,
                                               const std::vector<data::Example>& calib,
                                               std::vector<LayerRefit>& refits) {
  const auto& p = config_.prune;
  const auto t = Clock::now();
  double sequential_seconds = 0;
  std::map<std::string, torch::Tensor> values;
  for (const auto& [key, k] : keep) {
    // device: cpu (gate values are read on the host by prune_heads; filled element-wise here)
    auto v = torch::zeros({static_cast<int64_t>(k.size())});
    for (size_t h = 0; h < k.size(); ++h) v[static_cast<int64_t>(h)] = k[h] ? 1.0f : 0.0f;
    values[key] = v;
  }
  model::Transformer pruned{nullptr};
  {
    torch::NoGradGuard no_grad;
    pruned = prune_heads(inputs_.model, values);
  }
  if (p.reconstruct && p.reconstruct_mode != ReconstructMode::kOnePass) {
    const auto t_seq = Clock::now();
    refits = reconstruct_sequential(pruned, inputs_.model, calib, config_.train.max_tokens,
                                    inputs_.device, p.ridge, p.reconstruct_mode,
                                    p.reconstruct_every_layer);
    seconds_.reconstruct = sequential_seconds = seconds_since(t_seq);
    log::info("fisher: {} reconstruction of {} layers in {:.1f} s", choice_name(p.reconstruct_mode),
              refits.size(), seconds_.reconstruct);
  }
  // (A post-training run has no training state: step 0.)
  run::save_checkpoint(folder_.pruned(), pruned, nullptr, run::TrainState{}, config_,
                       inputs_.vocab_files);
  seconds_.save = seconds_since(t) - sequential_seconds;
  return pruned;
}

train::EvalResult FisherPruning::evaluate_pruned(model::Transformer& pruned) {
  const auto t = Clock::now();
  const auto r = train::evaluate_dev(pruned, inputs_, config_);
  seconds_.dev_evaluations += seconds_since(t);
  run::append_jsonl(folder_.metrics(),
                    nlohmann::json{{"event", "final"},
                                   {"step", 0},
                                   {"dev_loss", r.loss},
                                   {"dev_bleu", r.bleu},
                                   {"dev_chrf", r.chrf},
                                   {"heads_e_d_de", pruned->architecture().summary()}});
  return r;
}

// head_removal.csv: every prunable head; removed ones ranked by the order a greedy search would
// remove them (lowest diagonal Fisher first). Returns the csv; `removed_fisher` sums the removed
// heads' scores.
std::string FisherPruning::write_head_removal(const std::vector<Head>& all, const KeepMap& keep,
                                              double& removed_fisher) const {
  std::vector<const Head*> removed;
  for (const auto& h : all)
    if (!keep.at(HeadGatesImpl::key(h.type, h.layer))[static_cast<size_t>(h.head)])
      removed.push_back(&h);
  std::stable_sort(removed.begin(), removed.end(),
                   [](const Head* a, const Head* b) { return a->fisher < b->fisher; });
  std::map<const Head*, size_t> rank;
  for (size_t i = 0; i < removed.size(); ++i) rank[removed[i]] = i + 1;
  std::vector<const Head*> rows;
  for (const auto* h : removed) rows.push_back(h);
  for (const auto& h : all)
    if (!rank.count(&h)) rows.push_back(&h);
  removed_fisher = 0;
  std::vector<run::HeadRemoval> log_rows;
  for (const auto* h : rows) {
    const bool kept = !rank.count(h);
    if (!kept) removed_fisher += h->fisher;
    run::HeadRemoval row;
    row.head = {h->type, h->layer, h->head};
    if (!kept) row.removal_step = static_cast<int64_t>(rank.at(h));
    row.fisher = h->fisher;
    log_rows.push_back(row);
  }
  run::write_head_removal(folder_.head_removal(), log_rows, run::HeadRemovalKind::kFisher);
  return run::head_removal_csv(log_rows, run::HeadRemovalKind::kFisher);
}

PruneOutcome FisherPruning::outcome(const PruneResult& r, double removed_fisher) const {
  const auto& p = config_.prune;
  PruneOutcome o;
  o.method = "fisher";
  o.init_from = options_.init_from ? options_.init_from->string() : "";
  o.attention_gated = p.attention;
  o.target_heads = p.target_heads;
  o.budget = r.budget.json;
  o.heads_before = before_.summary();
  o.architecture_after = r.pruned->architecture();
  o.heads_after = o.architecture_after.summary();
  o.parameters_before = params_before_;
  o.parameters_after = model::parameter_count(*r.pruned);
  o.decode_flops_fraction = decode_flops(o.architecture_after) / decode_flops(before_);
  o.dev_bleu_start = dev_bleu_start_;
  o.dev_bleu_end = dev_bleu_end_;
  o.fisher = FisherDetails{r.stats.sentences,
                           r.stats.tokens,
                           removed_fisher,
                           p.rearrange,
                           r.rearranged,
                           p.reconstruct,
                           p.reconstruct ? std::string(choice_name(p.reconstruct_mode)) : "off",
                           p.ridge,
                           static_cast<int64_t>(r.refits.size()),
                           r.refits,
                           seconds_};
  o.pruned_checkpoint = folder_.pruned().string();
  return o;
}

void FisherPruning::write_records(const PruneOutcome& o, const std::string& csv) {
  write_prune_outcome(folder_, o, csv);
  run::RunSummary done;
  done.command = "prune";
  done.method = "fisher";
  done.seconds = seconds_.pruning + seconds_.dev_evaluations;
  done.pruning_seconds = seconds_.pruning;
  done.dev_bleu_start = o.dev_bleu_start;
  done.dev_bleu_end = o.dev_bleu_end;
  run::write_summary(folder_, done);
  log::info(
      "pruned (fisher): heads {} -> {}, parameters {} -> {}, decoding FLOPs x{:.3f}, dev BLEU "
      "{:.2f} -> {:.2f}; wrote {}",
      o.heads_before, o.heads_after, o.parameters_before, o.parameters_after,
      *o.decode_flops_fraction, o.dev_bleu_start, o.dev_bleu_end, o.pruned_checkpoint);
}

std::vector<std::vector<double>> FisherPruning::alternating_seconds(
    std::vector<model::Transformer> models, const std::vector<std::vector<int>>& sources) {
  for (auto& m : models) decode_seconds(m, sources);  // warm-up
  std::vector<std::vector<double>> times(models.size());
  for (int rep = 0; rep < 3; ++rep)
    for (size_t i = 0; i < models.size(); ++i)
      times[i].push_back(decode_seconds(models[i], sources));
  return times;
}

std::vector<std::vector<int>> FisherPruning::latency_sources() const {
  std::vector<std::vector<int>> out;
  for (size_t i = 0; i < inputs_.dev.size() && i < 100; ++i) out.push_back(inputs_.dev[i].src);
  return out;
}

double FisherPruning::decode_seconds(model::Transformer& m,
                                     const std::vector<std::vector<int>>& sources) {
  torch::NoGradGuard no_grad;
  m->eval();
  auto options = decode::SearchOptions::from(config_.decode);
  const auto t = Clock::now();
  const auto out =
      decode::translate_ids(m, sources, options, config_.decode.batch_size, inputs_.device);
  const double seconds = seconds_since(t);
  // Per output token: a model without a whole attention type writes outputs of other lengths
  // (measured: the Bible baseline without decoder self-attention writes longer ones), which
  // would otherwise read as a cost of the type's heads.
  size_t tokens = 0;
  for (const auto& o : out) tokens += o.size() + 1;
  return seconds / static_cast<double>(std::max<size_t>(tokens, 1));
}

double FisherPruning::decode_flops(const model::Architecture& a) const {
  return model::decode_flops(a, config_.model, inputs_.tgt_vocab->size(), src_len_, out_len_,
                             config_.decode.beam);
}

}  // namespace

void fisher_prune_command(const Config& config, const train::TrainOptions& options) {
  HC_CHECK(config.prune.method == PruneMethod::kFisher, "fisher_prune_command: prune.method is {}",
           choice_name(config.prune.method));
  HC_CHECK(options.init_from, "prune.init_from is required: the converged checkpoint to prune");
  HC_CHECK(!options.comm, "prune.method fisher runs in one process (no launch)");
  FisherPruning(config, options).run();
}

}  // namespace headcount::prune
