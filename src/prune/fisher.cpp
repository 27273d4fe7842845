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
#include "headcount/prune/head_gates.h"
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
    // dL_s/dm.
    token_loss.sum().backward();
    for (auto& l : layers) {
      const auto g = l.scale.grad().to(torch::kDouble).cpu();  // [B, H]
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

std::pair<torch::Tensor, torch::Tensor> refit_output_projection(const torch::Tensor& gram,
                                                                const torch::Tensor& weight,
                                                                const torch::Tensor& bias,
                                                                const std::vector<bool>& keep,
                                                                double ridge) {
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
  const auto full = torch::cat({weight.detach().to(torch::kDouble).cpu().t(),
                                bias.detach().to(torch::kDouble).cpu().unsqueeze(0)},
                               0);  // [width+1, D]
  const auto sol = ridge_solve(g.index_select(0, index).index_select(1, index),
                               g.index_select(0, index).matmul(full), ridge);  // [k+1, D]
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

// x -> x + f(x) (pre-norm: f reads norm(x)) or norm(x + f(x)) (post-norm), as the layers do.
torch::Tensor sublayer_input(torch::nn::LayerNorm& norm, const torch::Tensor& x, bool pre) {
  return pre ? norm(x) : x;
}
torch::Tensor sublayer_output(torch::nn::LayerNorm& norm, const torch::Tensor& x,
                              const torch::Tensor& h, bool pre) {
  return pre ? x + h : norm(x + h);
}
template <typename Layer>
torch::Tensor feed_forward(Layer& layer, const torch::Tensor& x, bool pre) {
  const auto h = layer->fc2(torch::relu(layer->fc1(sublayer_input(layer->ffn_norm, x, pre))));
  return sublayer_output(layer->ffn_norm, x, h, pre);
}

}  // namespace

int reconstruct_sequential(model::Transformer& pruned, model::Transformer& reference,
                           const std::vector<data::Example>& examples, int64_t max_tokens,
                           const torch::Device& device, double ridge, ReconstructMode mode) {
  HC_CHECK(mode != ReconstructMode::kOnePass, "reconstruct_sequential: mode one_pass");
  HC_CHECK(!examples.empty(), "sequential reconstruction needs at least one sentence");
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
  torch::NoGradGuard no_grad;
  const bool pruned_training = pruned->is_training(), reference_training = reference->is_training();
  pruned->eval();
  reference->eval();
  const bool pre = reference->config().pre_norm;
  const int64_t width = reference->config().d_model;

  std::vector<StreamBatch> batches;
  for (const auto& idx : calibration_batches(examples, max_tokens)) {
    const data::Batch b = data::collate(examples, idx, device);
    StreamBatch s;
    s.tgt_in = b.tgt_in;
    s.src_bias = model::TransformerImpl::source_bias(b.src);
    s.self_bias = model::causal_bias(b.tgt_in.size(1), device);
    s.src_rows = query_rows(b.src);
    s.tgt_rows = query_rows(b.tgt_in);
    s.xo = reference->embed_source(b.src);
    s.xp = pruned->embed_source(b.src);
    batches.push_back(std::move(s));
  }

  int refit = 0;
  // One attention sublayer: refits `pa` when it has lost heads, then moves both streams past it.
  const auto attention = [&](model::MultiheadAttention ra, model::MultiheadAttention pa,
                             torch::nn::LayerNorm rn, torch::nn::LayerNorm pn, bool encoder,
                             bool self) {
    const auto query = [&](StreamBatch& s, bool ref) {
      return sublayer_input(ref ? rn : pn, ref ? s.xo : s.xp, pre);
    };
    const auto run = [&](StreamBatch& s, bool ref) {
      const auto q = query(s, ref);
      const auto& bias = encoder || !self ? s.src_bias : s.self_bias;
      const auto& memory = self ? q : (ref ? s.mo : s.mp);
      return (ref ? ra : pa)->forward(q, memory, bias);
    };
    std::vector<torch::Tensor> ho;
    for (auto& s : batches) ho.push_back(run(s, true));
    // The pruned layer's merged head outputs per batch, kept to apply the refit W_o to them.
    std::vector<torch::Tensor> zp;
    if (pa->num_heads() < ra->num_heads()) {
      const int64_t k = pa->num_heads() * pa->head_dim();
      // Normal equations in double on the host, as in calibrate(): z and y are copied there.
      auto a = torch::zeros({k + 1, k + 1}, torch::kDouble);  // device: cpu (host accumulator)
      auto c = torch::zeros({k + 1, width}, torch::kDouble);  // device: cpu (host accumulator)
      pa->set_record(true);
      struct RecordOff {  // also when a forward throws
        model::MultiheadAttention a;
        ~RecordOff() { a->set_record(false); }
      } record_off{pa};
      for (size_t i = 0; i < batches.size(); ++i) {
        auto& s = batches[i];
        const auto& rows = encoder ? s.src_rows : s.tgt_rows;
        run(s, false);
        zp.push_back(k > 0 ? merged_heads(pa->last_head_outputs())
                           : s.xp.new_empty({s.xp.size(0), s.xp.size(1), 0}));
        const auto z = design_rows(zp.back(), rows);
        auto y = mode == ReconstructMode::kSequentialStream ? ho[i] + s.xo - s.xp : ho[i];
        y = y.reshape({-1, width}).index_select(0, rows).to(torch::kDouble).cpu();
        a += z.t().matmul(z);
        c += z.t().matmul(y);
      }
      const auto sol = ridge_solve(a, c, ridge);  // [k+1, D]
      if (k > 0)  // a layer left without heads has no W_o, only its bias
        pa->out_proj_weight.copy_(sol.slice(0, 0, k).t().to(pa->out_proj_weight.options()));
      pa->out_proj_bias.copy_(sol[k].to(pa->out_proj_bias.options()));
      ++refit;
    }
    for (size_t i = 0; i < batches.size(); ++i) {
      auto& s = batches[i];
      // A refit layer's new output from its recorded heads, as its forward computes it.
      const auto hp = zp.empty() || pa->num_heads() == 0
                          ? run(s, false)
                          : torch::linear(zp[i], pa->out_proj_weight, pa->out_proj_bias);
      s.xo = sublayer_output(rn, s.xo, ho[i], pre);
      s.xp = sublayer_output(pn, s.xp, hp, pre);
    }
  };

  for (size_t l = 0; l < reference->encoder_layers.size(); ++l) {
    auto& r = reference->encoder_layers[l];
    auto& p = pruned->encoder_layers[l];
    attention(r->self_attn, p->self_attn, r->self_attn_norm, p->self_attn_norm, true, true);
    for (auto& s : batches) {
      s.xo = feed_forward(r, s.xo, pre);
      s.xp = feed_forward(p, s.xp, pre);
    }
  }
  for (auto& s : batches) {
    s.mo = pre ? reference->encoder_norm(s.xo) : s.xo;
    s.mp = pre ? pruned->encoder_norm(s.xp) : s.xp;
    s.xo = reference->embed_target(s.tgt_in);
    s.xp = pruned->embed_target(s.tgt_in);
  }
  for (size_t l = 0; l < reference->decoder_layers.size(); ++l) {
    auto& r = reference->decoder_layers[l];
    auto& p = pruned->decoder_layers[l];
    attention(r->self_attn, p->self_attn, r->self_attn_norm, p->self_attn_norm, false, true);
    attention(r->cross_attn, p->cross_attn, r->cross_attn_norm, p->cross_attn_norm, false, false);
    for (auto& s : batches) {
      s.xo = feed_forward(r, s.xo, pre);
      s.xp = feed_forward(p, s.xp, pre);
    }
  }
  if (pruned_training) pruned->train();
  if (reference_training) reference->train();
  return refit;
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

std::vector<bool> rearrange_layer(const torch::Tensor& fisher_block, int64_t keep) {
  const auto f = fisher_block.to(torch::kDouble).cpu().contiguous();
  const int64_t h = f.size(0);
  HC_CHECK(keep >= 0 && keep <= h, "rearrange: cannot keep {} of {} heads", keep, h);
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
  double subsets = 1;
  for (int64_t i = 0; i < keep; ++i)
    subsets = subsets * static_cast<double>(h - i) / static_cast<double>(i + 1);
  std::vector<bool> best(static_cast<size_t>(h), true);
  if (subsets <= 20000) {
    // Every subset of size `keep`, as a selection mask permuted lexicographically.
    std::vector<bool> sel(static_cast<size_t>(h), false);
    std::fill(sel.begin(), sel.begin() + keep, true);
    double best_loss = std::numeric_limits<double>::infinity();
    do {
      const double l = removed_loss(sel);
      if (l < best_loss - 1e-15) best_loss = l, best = sel;
    } while (std::prev_permutation(sel.begin(), sel.end()));
    return best;
  }
  // Greedy: remove, one at a time, the head whose removal adds the least.
  for (int64_t r = 0; r < h - keep; ++r) {
    int64_t pick = -1;
    double pick_loss = std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < h; ++i) {
      if (!best[static_cast<size_t>(i)]) continue;
      best[static_cast<size_t>(i)] = false;
      const double l = removed_loss(best);
      best[static_cast<size_t>(i)] = true;
      if (l < pick_loss) pick_loss = l, pick = i;
    }
    best[static_cast<size_t>(pick)] = false;
  }
  return best;
}

namespace {

// The run: a Trainer for its data, vocabulary, model loading and dev evaluation; it never trains.
class FisherRun : public train::Trainer {
 public:
  using Trainer::Trainer;
  void run_fisher();

 private:
  std::vector<std::vector<int>> latency_sources() const;
  // Seconds per output token of decoding `sources`.
  double decode_seconds(model::Transformer& m, const std::vector<std::vector<int>>& sources);
};

std::vector<std::vector<int>> FisherRun::latency_sources() const {
  std::vector<std::vector<int>> out;
  for (size_t i = 0; i < dev_.size() && i < 100; ++i) out.push_back(dev_[i].src);
  return out;
}

double FisherRun::decode_seconds(model::Transformer& m,
                                 const std::vector<std::vector<int>>& sources) {
  torch::NoGradGuard no_grad;
  m->eval();
  auto options = decode::SearchOptions::from(config_.decode);
  const auto t = Clock::now();
  const auto out = decode::translate_ids(m, sources, options, config_.decode.batch_size, device_);
  const double seconds = seconds_since(t);
  // Per output token: a model without a whole attention type writes outputs of other lengths
  // (measured: the Bible baseline without decoder self-attention writes longer ones), which
  // would otherwise read as a cost of the type's heads.
  size_t tokens = 0;
  for (const auto& o : out) tokens += o.size() + 1;
  return seconds / static_cast<double>(std::max<size_t>(tokens, 1));
}

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

void FisherRun::run_fisher() {
  const fs::path run = options_.run_dir;
  std::error_code ec;
  if (fs::exists(run::RunFolder{run}.summary(), ec)) {
    log::info("{} is finished (summary.json): nothing to do", run.string());
    return;
  }
  const auto& p = config_.prune;
  init();
  // An unfinished run starts over (minutes): its event log first, so that the folder is a run's
  // before config.yaml is.
  io::write_file_atomic(run::RunFolder{run}.metrics(), "");
  save_config(config_, run::RunFolder{run}.config());
  const auto types = gated_types(p);
  const model::Architecture before = model_->architecture();
  int64_t params_before = 0;
  for (const auto& t : model_->parameters()) params_before += t.numel();

  // Dev BLEU of the unpruned model (not part of the pruning time).
  auto t_eval = Clock::now();
  const auto r0 = evaluate();
  double eval_seconds = seconds_since(t_eval);
  log_metrics({{"event", "eval"},
               {"step", 0},
               {"dev_loss", r0.loss},
               {"dev_bleu", r0.bleu},
               {"dev_chrf", r0.chrf}});
  log::info("fisher: unpruned dev BLEU {:.2f} chrF {:.2f} ({} sentences)", r0.bleu, r0.chrf,
            r0.sentences);

  const auto t_all = Clock::now();
  // 1. Calibration sentences: N training pairs drawn with the run's seed.
  std::vector<size_t> order(train_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(static_cast<uint64_t>(config_.seed));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<data::Example> calib;
  for (size_t i = 0;
       i < order.size() && calib.size() < static_cast<size_t>(p.calibration_sentences); ++i)
    calib.push_back(train_[order[i]]);
  if (calib.size() < static_cast<size_t>(p.calibration_sentences))
    log::warn("fisher: prune.calibration_sentences is {}, the training set has {}",
              p.calibration_sentences, calib.size());
  const bool one_pass_refit = p.reconstruct && p.reconstruct_mode == ReconstructMode::kOnePass;
  auto t = Clock::now();
  const auto stats =
      calibrate(model_, calib, types, config_.train.max_tokens, device_, one_pass_refit);
  const double calib_seconds = seconds_since(t);

  // 2. Budget and search.
  t = Clock::now();
  std::map<model::AttentionType, std::vector<double>> scores;
  struct Head {
    model::AttentionType type;
    int layer;
    int64_t head;
    double fisher;
  };
  std::vector<Head> all;
  for (auto type : types) {
    const auto& heads = before.heads(type);
    for (size_t l = 0; l < heads.size(); ++l) {
      if (heads[l] == 0) continue;
      const auto diag = stats.fisher.at(HeadGatesImpl::key(type, static_cast<int>(l))).diagonal();
      for (int64_t h = 0; h < heads[l]; ++h) {
        all.push_back({type, static_cast<int>(l), h, diag[h].item<double>()});
        scores[type].push_back(diag[h].item<double>());
      }
    }
  }
  HC_CHECK(!all.empty(), "prune.attention ({}) names no attention type with heads",
           fmt::join(p.attention, ", "));
  SearchBudget budget;
  nlohmann::ordered_json budget_json;
  std::vector<int64_t> src_len, out_len;
  for (size_t i = 0; i < dev_.size() && i < 500; ++i) {
    src_len.push_back(static_cast<int64_t>(dev_[i].src.size()) + 1);
    out_len.push_back(static_cast<int64_t>(dev_[i].tgt.size()) + 1);
  }
  const auto flops = [&](const model::Architecture& a) {
    return model::decode_flops(a, config_.model, tgt_vocab_->size(), src_len, out_len,
                               config_.decode.beam);
  };
  const double flops_before = flops(before);
  nlohmann::ordered_json latency_json;
  if (p.target_heads > 0) {
    budget.exact_total = p.target_heads;
    HC_CHECK(p.target_heads <= static_cast<int64_t>(all.size()),
             "prune.target_heads is {}, but the gated types ({}) have {} heads", p.target_heads,
             fmt::join(p.attention, ", "), all.size());
    budget_json = {{"target_heads", p.target_heads}};
  } else if (!p.target_heads_per_type.empty()) {
    const model::AttentionType order3[] = {model::AttentionType::kEncSelf,
                                           model::AttentionType::kDecSelf,
                                           model::AttentionType::kEncDec};
    for (size_t i = 0; i < 3; ++i) {
      const auto n = static_cast<int64_t>(p.target_heads_per_type[i]);
      const bool gated = std::find(types.begin(), types.end(), order3[i]) != types.end();
      HC_CHECK(gated ? n <= before.total(order3[i]) : n == before.total(order3[i]),
               "prune.target_heads_per_type: {} {} heads, but the model has {}{}", n,
               model::attention_name(order3[i]), before.total(order3[i]),
               gated ? "" : " and the type is not in prune.attention (it keeps them all)");
      if (gated) budget.exact_per_type[order3[i]] = n;
    }
    budget_json = {{"target_heads_per_type", p.target_heads_per_type}};
  } else {
    // A linear cost per head of each gated type: FLOPs by formula, or latency measured here.
    const bool latency = p.latency_fraction > 0;
    std::map<model::AttentionType, double> full_cost, without;
    double total = 0;
    if (!latency) {
      total = flops_before;
      for (auto type : types) {
        model::Architecture a = before;
        for (auto& n : a.heads(type)) n = 0;
        without[type] = flops(a);
      }
    } else {
      torch::NoGradGuard no_grad;
      const auto sources = latency_sources();
      std::vector<std::pair<model::AttentionType, model::Transformer>> variants;
      for (auto type : types)
        variants.emplace_back(type, prune_heads(model_, values_without(before, type)));
      decode_seconds(model_, sources);  // warm-up
      std::vector<double> full_t;
      std::map<model::AttentionType, std::vector<double>> var_t;
      for (int rep = 0; rep < 3; ++rep) {  // alternating, median of three
        full_t.push_back(decode_seconds(model_, sources));
        for (auto& [type, m] : variants) var_t[type].push_back(decode_seconds(m, sources));
      }
      // Seconds per output token, scaled to the full model's output.
      size_t full_tokens = 0;
      {
        auto options = decode::SearchOptions::from(config_.decode);
        for (const auto& o :
             decode::translate_ids(model_, sources, options, config_.decode.batch_size, device_))
          full_tokens += o.size() + 1;
      }
      for (auto& x : full_t) x *= static_cast<double>(full_tokens);
      for (auto& [type, v] : var_t)
        for (auto& x : v) x *= static_cast<double>(full_tokens);
      total = median(full_t);
      for (auto type : types) without[type] = median(var_t[type]);
      for (auto type : types)
        if (without[type] >= total)
          log::warn(
              "fisher: decoding without the {} heads measured no faster ({:.3f} s against "
              "{:.3f} s): their latency cost is taken as 0",
              model::attention_name(type), without[type], total);
      latency_json = {{"sentences", sources.size()},
                      {"beam", config_.decode.beam},
                      {"full_output_tokens", full_tokens},
                      {"note", "seconds per output token x the full model's output tokens"},
                      {"full_seconds", total},
                      {"full_seconds_runs", full_t}};
      for (auto type : types)
        latency_json[fmt::format("without_{}_seconds", model::attention_name(type))] =
            without[type];
    }
    double fixed = total;
    for (auto type : types) {
      const auto n = static_cast<double>(before.total(type));
      budget.cost[type] = std::max(0.0, (total - without[type]) / n);
      fixed -= budget.cost[type] * n;
    }
    budget.fixed = fixed;
    const double fraction = latency ? p.latency_fraction : p.flops_fraction;
    budget.limit = fraction * total;
    budget_json = {{latency ? "latency_fraction" : "flops_fraction", fraction},
                   {"total", total},
                   {"fixed", fixed},
                   {"limit", budget.limit}};
    for (const auto& [type, c] : budget.cost)
      budget_json[fmt::format("cost_per_{}_head", model::attention_name(type))] = c;
    if (latency) budget_json["latency_measurement"] = latency_json;
  }
  const auto counts = search_counts(scores, budget);
  // Heads kept by the diagonal search: the top k_t of each type.
  std::map<std::string, std::vector<bool>> keep;
  for (auto type : types) {
    std::vector<const Head*> of_type;
    for (const auto& h : all)
      if (h.type == type) of_type.push_back(&h);
    std::stable_sort(of_type.begin(), of_type.end(),
                     [](const Head* a, const Head* b) { return a->fisher > b->fisher; });
    for (const auto* h : of_type) {
      auto& k = keep[HeadGatesImpl::key(h->type, h->layer)];
      if (k.empty()) k.assign(static_cast<size_t>(before.heads(type)[h->layer]), false);
    }
    for (int64_t i = 0; i < counts.at(type); ++i) {
      const auto* h = of_type[static_cast<size_t>(i)];
      keep[HeadGatesImpl::key(h->type, h->layer)][static_cast<size_t>(h->head)] = true;
    }
  }
  const double search_seconds = seconds_since(t);

  // 3. Rearrangement within layers.
  t = Clock::now();
  int rearranged = 0;
  if (p.rearrange) {
    for (auto& [key, k] : keep) {
      const auto n = std::count(k.begin(), k.end(), true);
      auto r = rearrange_layer(stats.fisher.at(key), n);
      if (r != k) ++rearranged, k = r;
    }
  }
  const double rearrange_seconds = seconds_since(t);

  // 4. Reconstruction of every layer that lost a head (one pass; sequential after step 5).
  t = Clock::now();
  int refit = 0;
  if (one_pass_refit) {
    torch::NoGradGuard no_grad;
    for (auto type : types) {
      const auto attns = model_->attention_layers(type);
      for (size_t l = 0; l < attns.size(); ++l) {
        const auto key = HeadGatesImpl::key(type, static_cast<int>(l));
        const auto it = keep.find(key);
        if (it == keep.end() ||
            std::all_of(it->second.begin(), it->second.end(), [](bool b) { return b; }))
          continue;
        auto [w, b] = refit_output_projection(stats.gram.at(key), attns[l]->out_proj_weight,
                                              attns[l]->out_proj_bias, it->second, p.ridge);
        attns[l]->out_proj_weight.copy_(w);
        attns[l]->out_proj_bias.copy_(b);
        ++refit;
      }
    }
  }
  double reconstruct_seconds = seconds_since(t);

  // 5. The physically smaller model (refit layer by layer from its own inputs when sequential).
  t = Clock::now();
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
    pruned = prune_heads(model_, values);
  }
  if (p.reconstruct && !one_pass_refit) {
    const auto t_seq = Clock::now();
    refit = reconstruct_sequential(pruned, model_, calib, config_.train.max_tokens, device_,
                                   p.ridge, p.reconstruct_mode);
    reconstruct_seconds = sequential_seconds = seconds_since(t_seq);
    log::info("fisher: {} reconstruction of {} layers in {:.1f} s", choice_name(p.reconstruct_mode),
              refit, reconstruct_seconds);
  }
  run::save_checkpoint(run::RunFolder{run}.pruned(), pruned, nullptr, state_, config_,
                       vocab_files_);
  const double save_seconds = seconds_since(t) - sequential_seconds;
  const double pruning_seconds = seconds_since(t_all);
  int64_t params_after = 0;
  for (const auto& x : pruned->parameters()) params_after += x.numel();
  log::info("fisher: heads {} -> {} in {:.1f} s (calibration {:.1f} s on {} sentences)",
            before.summary(), pruned->architecture().summary(), pruning_seconds, calib_seconds,
            stats.sentences);

  // Dev BLEU of the pruned model.
  t_eval = Clock::now();
  model_ = pruned;
  const auto r1 = evaluate();
  eval_seconds += seconds_since(t_eval);
  nlohmann::json fin = {{"event", "final"},    {"step", 0},
                        {"dev_loss", r1.loss}, {"dev_bleu", r1.bleu},
                        {"dev_chrf", r1.chrf}, {"heads_e_d_de", pruned->architecture().summary()}};
  log_metrics(fin);

  // head_removal.csv: every prunable head; removed ones ranked by the order a greedy search
  // would remove them (lowest diagonal Fisher first).
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
  double removed_fisher = 0;
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
  run::write_head_removal(run::RunFolder{run}.head_removal(), log_rows,
                          run::HeadRemovalKind::kFisher);
  const std::string csv = run::head_removal_csv(log_rows, run::HeadRemovalKind::kFisher);

  const double flops_after = flops(pruned->architecture());
  nlohmann::ordered_json summary = {
      {"method", "fisher"},
      {"init_from", options_.init_from ? options_.init_from->string() : ""},
      {"attention_gated", p.attention},
      {"lambda", 0.0},
      {"target_heads", p.target_heads},
      {"steps", 0},
      {"budget", budget_json},
      {"heads_before_e_d_de", before.summary()},
      {"heads_after_e_d_de", pruned->architecture().summary()},
      {"heads_after", pruned->architecture().to_json()},
      {"parameters_before", params_before},
      {"parameters_after", params_after},
      {"decode_flops_fraction", flops_after / flops_before},
      {"dev_bleu_start", r0.bleu},
      {"dev_bleu_end", r1.bleu},
      {"calibration_sentences", stats.sentences},
      {"calibration_target_tokens", stats.tokens},
      {"removed_diagonal_fisher", removed_fisher},
      {"rearrange", p.rearrange},
      {"layers_rearranged", rearranged},
      {"reconstruct", p.reconstruct},
      {"reconstruct_mode", p.reconstruct ? choice_name(p.reconstruct_mode) : "off"},
      {"ridge", p.ridge},
      {"layers_refit", refit},
      {"seconds",
       {{"pruning", pruning_seconds},
        {"calibration", calib_seconds},
        {"search", search_seconds},
        {"rearrange", rearrange_seconds},
        {"reconstruct", reconstruct_seconds},
        {"save", save_seconds},
        {"dev_evaluations", eval_seconds}}},
      {"pruned_checkpoint", (run::RunFolder{run}.pruned()).string()}};
  io::write_file_atomic(run::RunFolder{run}.pruning(), summary.dump(2) + "\n");
  std::string readme = fmt::format(
      "# Pruning run (Fisher, post-training)\n\nFrom `{}`: Fisher head masks (Kwon et al. 2022) "
      "on {}, budget {}, {} calibration sentences, rearrangement {}, reconstruction {} (ridge "
      "{}); {:.1f} s of pruning.\n\n"
      "| | heads (enc / dec / enc-dec) | parameters | decoding FLOPs | dev BLEU |\n"
      "| --- | --- | ---: | ---: | ---: |\n"
      "| start | {} | {} | 1.000 | {:.2f} |\n| end (pruned/) | {} | {} | {:.3f} | {:.2f} |\n\n"
      "Heads in the order the search removed them (head_removal.csv: removal_step is the rank, "
      "lowest diagonal Fisher first; kept heads last):\n\n```\n",
      summary["init_from"].get<std::string>(), fmt::join(p.attention, ", "), budget_json.dump(),
      stats.sentences, p.rearrange ? "on" : "off",
      p.reconstruct ? std::string(choice_name(p.reconstruct_mode)) : std::string("off"), p.ridge,
      pruning_seconds, before.summary(), params_before, r0.bleu, pruned->architecture().summary(),
      params_after, flops_after / flops_before, r1.bleu);
  readme += text::first_lines(csv, 25) + "```\n";
  io::write_file_atomic(run::RunFolder{run}.readme(), readme);
  const nlohmann::ordered_json done = {{"command", "prune"},
                                       {"method", "fisher"},
                                       {"seconds", pruning_seconds + eval_seconds},
                                       {"pruning_seconds", pruning_seconds},
                                       {"dev_bleu_start", r0.bleu},
                                       {"dev_bleu_end", r1.bleu}};
  io::write_file_atomic(run::RunFolder{run}.summary(), done.dump(2) + "\n");
  log::info(
      "pruned (fisher): heads {} -> {}, parameters {} -> {}, decoding FLOPs x{:.3f}, dev BLEU "
      "{:.2f} -> {:.2f}; wrote {}",
      before.summary(), pruned->architecture().summary(), params_before, params_after,
      flops_after / flops_before, r0.bleu, r1.bleu, (run::RunFolder{run}.pruned()).string());
}

}  // namespace

void fisher_prune_command(const Config& config, const train::TrainOptions& options) {
  HC_CHECK(config.prune.method == PruneMethod::kFisher, "fisher_prune_command: prune.method is {}",
           choice_name(config.prune.method));
  HC_CHECK(options.init_from, "prune.init_from is required: the converged checkpoint to prune");
  HC_CHECK(!options.comm, "prune.method fisher runs in one process (no launch)");
  FisherRun run(config, options);
  run.run_fisher();
}

}  // namespace headcount::prune
