#include "headcount/prune/head_gates.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "headcount/common/check.h"

namespace headcount::prune {

HardConcreteOptions gate_options(const PruneConfig& c) {
  HardConcreteOptions o;
  o.temperature = c.temperature;
  o.stretch_low = c.stretch_low;
  o.stretch_high = c.stretch_high;
  o.init_log_alpha = c.init_log_alpha;
  o.noise = c.noise;
  return o;
}

std::vector<model::AttentionType> gated_types(const PruneConfig& c) {
  std::vector<model::AttentionType> out;
  for (const auto& name : c.attention) out.push_back(model::attention_from_name(name));
  return out;
}

std::vector<TargetGroup> target_groups(const PruneConfig& c) {
  if (c.target_heads > 0) return {{gated_types(c), c.target_heads, "all"}};
  std::vector<TargetGroup> out;
  if (c.target_heads_per_type.empty()) return out;
  const auto gated = gated_types(c);
  for (size_t i = 0; i < std::size(model::kAttentionTypes); ++i) {
    const auto t = model::kAttentionTypes[i];
    if (std::find(gated.begin(), gated.end(), t) == gated.end()) continue;
    out.push_back(
        {{t}, static_cast<int64_t>(c.target_heads_per_type.at(i)), model::attention_name(t)});
  }
  return out;
}

namespace {

bool of_types(model::AttentionType t, const std::vector<model::AttentionType>& types) {
  return types.empty() || std::find(types.begin(), types.end(), t) != types.end();
}

}  // namespace

std::string HeadGatesImpl::key(model::AttentionType type, int layer) {
  return fmt::format("{}.{}", model::attention_name(type), layer);
}

HeadGatesImpl::HeadGatesImpl(model::Transformer& model,
                             const std::vector<model::AttentionType>& types,
                             const HardConcreteOptions& options) {
  for (auto type : types) {
    const auto attns = model->attention_layers(type);
    for (size_t i = 0; i < attns.size(); ++i) {
      if (attns[i]->num_heads() == 0) continue;
      Layer l{type, static_cast<int>(i), HardConcreteGate(attns[i]->num_heads(), options),
              attns[i]};
      // Parameter names: enc_self_3.log_alpha (no dots allowed in module names).
      register_module(fmt::format("{}_{}", model::attention_name(type), i), l.gate);
      l.gate->to(attns[i]->out_proj_bias.device());
      layers_.push_back(l);
    }
  }
}

void HeadGatesImpl::apply_sample(int64_t batch) {
  for (auto& l : layers_) l.attention->set_head_scale(l.gate->sample(batch));
}

void HeadGatesImpl::draw_step_noise() {
  step_noise_.clear();
  for (auto& l : layers_) step_noise_.push_back(l.gate->draw_noise(1));
}

void HeadGatesImpl::apply_step_sample() {
  HC_CHECK(step_noise_.size() == layers_.size(), "no step noise drawn for the gates");
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i].attention->set_head_scale(layers_[i].gate->sample_with(step_noise_[i]));
}

void HeadGatesImpl::apply_eval() {
  for (auto& l : layers_) l.attention->set_head_scale(l.gate->eval_gate().detach());
}

void HeadGatesImpl::apply_values(const std::map<std::string, torch::Tensor>& values) {
  for (auto& l : layers_) {
    const auto it = values.find(key(l.type, l.layer));
    l.attention->set_head_scale(it == values.end() ? l.gate->eval_gate().detach() : it->second);
  }
}

void HeadGatesImpl::clear() {
  for (auto& l : layers_) l.attention->set_head_scale({});
}

torch::Tensor HeadGatesImpl::penalty(PenaltyNorm norm) const {
  HC_CHECK(!layers_.empty(), "no gated attention layer: nothing to prune");
  auto total = expected_open();
  return norm == PenaltyNorm::kLayerMean ? total / static_cast<double>(layers_.size()) : total;
}

torch::Tensor HeadGatesImpl::expected_open(const std::vector<model::AttentionType>& types) const {
  std::vector<torch::Tensor> sums;
  for (const auto& l : layers_)
    if (of_types(l.type, types)) sums.push_back(l.gate->penalty());
  HC_CHECK(!sums.empty(), "no gated attention layer of the types asked for");
  return torch::stack(sums).sum();
}

int64_t HeadGatesImpl::total_heads(const std::vector<model::AttentionType>& types) const {
  int64_t n = 0;
  for (const auto& l : layers_)
    if (of_types(l.type, types)) n += l.gate->num_heads();
  return n;
}

std::map<model::AttentionType, int64_t> HeadGatesImpl::open_heads() const {
  std::map<model::AttentionType, int64_t> out;
  for (const auto& l : layers_) out[l.type] += l.gate->eval_gate().gt(0).sum().item<int64_t>();
  return out;
}

std::map<std::string, torch::Tensor> HeadGatesImpl::eval_values() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& l : layers_) out[key(l.type, l.layer)] = l.gate->eval_gate().detach();
  return out;
}

std::map<std::string, torch::Tensor> top_n_values(const HeadGatesImpl& gates, int64_t n,
                                                  const std::vector<model::AttentionType>& types) {
  struct Head {
    float log_alpha;
    size_t layer;
    int64_t head;
  };
  std::vector<Head> heads;
  const auto& layers = gates.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!of_types(layers[i].type, types)) continue;
    auto la = layers[i].gate->log_alpha.detach().to(torch::kCPU);
    for (int64_t h = 0; h < la.size(0); ++h) heads.push_back({la[h].item<float>(), i, h});
  }
  HC_CHECK(n >= 0 && n <= static_cast<int64_t>(heads.size()),
           "cannot keep {} heads: {} heads are gated", n, heads.size());
  // Ties broken by position, so the choice is deterministic.
  std::stable_sort(heads.begin(), heads.end(),
                   [](const Head& a, const Head& b) { return a.log_alpha > b.log_alpha; });
  std::map<std::string, torch::Tensor> out;
  std::vector<torch::Tensor> eval, expected;
  for (const auto& l : layers) {
    eval.push_back(l.gate->eval_gate().detach().to(torch::kCPU));
    expected.push_back(l.gate->expected_gate().to(torch::kCPU));
    if (of_types(l.type, types))
      out[HeadGatesImpl::key(l.type, l.layer)] = torch::zeros_like(eval.back());
  }
  for (int64_t k = 0; k < n; ++k) {
    const auto& h = heads[k];
    float g = eval[h.layer][h.head].item<float>();
    // A head the gates closed, kept to make up the count: its expected gate, what its output was
    // weighted by on average in training (not 1: the rest of the model learned to do without it),
    // and never 0, which would remove it.
    if (g <= 0)
      g = std::max(expected[h.layer][h.head].item<float>(), std::numeric_limits<float>::min());
    out[HeadGatesImpl::key(layers[h.layer].type, layers[h.layer].layer)][h.head] = g;
  }
  for (auto& [k, v] : out) v = v.to(layers.front().gate->log_alpha.device());
  return out;
}

std::vector<int64_t> split_by_expected(std::vector<double> expected,
                                       const std::vector<int64_t>& sizes, int64_t n) {
  const size_t k = sizes.size();
  HC_CHECK(expected.size() == k, "{} expected counts for {} groups", expected.size(), k);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  HC_CHECK(n >= 0 && n <= total, "cannot keep {} heads: the groups have {}", n, total);
  double sum = 0;
  for (auto& e : expected) sum += (e = std::max(e, 0.0));
  if (sum <= 0)
    for (size_t i = 0; i < k; ++i) expected[i] = static_cast<double>(sizes[i]);
  // The quotas, capped at the groups' sizes: a capped group keeps all its heads and the others
  // share what is left in proportion to their expected counts, until no quota exceeds its size.
  std::vector<double> quota(k, 0.0);
  std::vector<bool> capped(k, false);
  for (bool again = true; again;) {
    again = false;
    double left = static_cast<double>(n), mass = 0;
    for (size_t i = 0; i < k; ++i) {
      if (capped[i])
        left -= static_cast<double>(sizes[i]);
      else
        mass += expected[i];
    }
    for (size_t i = 0; i < k; ++i) {
      if (capped[i]) continue;
      quota[i] = mass > 0 ? left * expected[i] / mass : 0.0;
      if (quota[i] > static_cast<double>(sizes[i])) {
        quota[i] = static_cast<double>(sizes[i]);
        capped[i] = again = true;
      }
    }
  }
  // Largest remainder: the floors, then one more head for the largest fractional parts (a group
  // that is full is skipped; a second pass only where quotas of 0 must make up the count).
  std::vector<int64_t> counts(k);
  int64_t assigned = 0;
  for (size_t i = 0; i < k; ++i) {
    counts[i] = std::min(sizes[i], static_cast<int64_t>(std::floor(quota[i])));
    assigned += counts[i];
  }
  std::vector<size_t> order(k);
  for (size_t i = 0; i < k; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return quota[a] - std::floor(quota[a]) > quota[b] - std::floor(quota[b]);
  });
  while (assigned < n) {
    for (size_t i : order) {
      if (assigned == n) break;
      if (counts[i] < sizes[i]) {
        ++counts[i];
        ++assigned;
      }
    }
  }
  return counts;
}

double counted_open(const HeadGatesImpl& gates, model::AttentionType type, double floor) {
  if (floor <= 0) return gates.expected_open({type}).item<double>();
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (const auto& l : gates.layers()) {
    if (l.type != type) continue;
    const auto p = l.gate->p_open().to(torch::kCPU).to(torch::kFloat64);
    sum += (p * p.ge(floor).to(torch::kFloat64)).sum().item<double>();
  }
  return sum;
}

std::vector<int64_t> expected_split(const HeadGatesImpl& gates, int64_t n,
                                    const std::vector<model::AttentionType>& types, double floor) {
  std::vector<double> expected;
  std::vector<int64_t> sizes;
  double counted = 0;
  for (auto t : types) {
    expected.push_back(counted_open(gates, t, floor));
    sizes.push_back(gates.total_heads({t}));
    counted += expected.back();
  }
  // A floor above every head's P_open leaves nothing to split by: the split without it.
  if (counted <= 0 && floor > 0) return expected_split(gates, n, types, 0);
  return split_by_expected(expected, sizes, n);
}

std::map<std::string, torch::Tensor> final_values(const HeadGatesImpl& gates,
                                                  const PruneConfig& p) {
  const auto groups = target_groups(p);
  if (groups.empty()) return gates.eval_values();
  std::map<std::string, torch::Tensor> out;
  for (const auto& g : groups) {
    if (p.target_split == TargetSplit::kExpected && g.types.size() > 1) {
      const auto counts = expected_split(gates, g.heads, g.types, p.split_floor);
      for (size_t i = 0; i < g.types.size(); ++i)
        out.merge(top_n_values(gates, counts[i], {g.types[i]}));
    } else {
      out.merge(top_n_values(gates, g.heads, g.types));
    }
  }
  return out;
}

std::map<std::string, torch::Tensor> fixed_mask_values(const HeadGatesImpl& gates,
                                                       const PruneConfig& p) {
  auto values = final_values(gates, p);
  if (p.rewind)
    for (auto& [key, v] : values) v = v.gt(0).to(v.scalar_type());
  return values;
}

namespace {

// Rows of one projection block kept for the heads in `keep`: [len(keep) * Dh, ...]
torch::Tensor take_heads(const torch::Tensor& block, const std::vector<int64_t>& keep, int64_t dh,
                         int64_t dim) {
  std::vector<torch::Tensor> parts;
  for (int64_t h : keep) parts.push_back(block.narrow(dim, h * dh, dh));
  return torch::cat(parts, dim);
}

}  // namespace

model::Transformer prune_heads(model::Transformer& m,
                               const std::map<std::string, torch::Tensor>& values) {
  torch::NoGradGuard no_grad;
  model::Architecture arch = m->architecture();
  const int64_t dh = arch.head_dim;
  // Kept heads and their values per layer.
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> kept;
  for (auto type : model::kAttentionTypes) {
    auto& counts = arch.heads(type);
    for (size_t i = 0; i < counts.size(); ++i) {
      const std::string k = HeadGatesImpl::key(type, static_cast<int>(i));
      const auto it = values.find(k);
      if (it == values.end()) continue;
      auto v = it->second.to(torch::kCPU).to(torch::kFloat32);
      HC_CHECK(v.size(0) == counts[i], "gate values for {} have {} heads, the layer {}", k,
               v.size(0), counts[i]);
      std::vector<int64_t> keep;
      std::vector<float> scale;
      for (int64_t h = 0; h < v.size(0); ++h) {
        if (v[h].item<float>() > 0) {
          keep.push_back(h);
          scale.push_back(v[h].item<float>());
        }
      }
      counts[i] = static_cast<int64_t>(keep.size());
      kept[k] = {keep, scale};
    }
  }
  model::Transformer out(m->config(), arch, m->src_embed->weight.size(0), m->output_weight.size(0));
  out->to(m->src_embed->weight.device());
  // Everything but the pruned attention layers is copied by name.
  std::map<std::string, torch::Tensor> source;
  for (const auto& [name, t] : model::named_weights(*m)) source[name] = t;
  std::map<std::string, const model::MultiheadAttentionImpl*> old_attn;
  std::map<std::string, model::MultiheadAttentionImpl*> new_attn;
  for (auto type : model::kAttentionTypes) {
    const auto a = m->attention_layers(type);
    auto b = out->attention_layers(type);
    for (size_t i = 0; i < a.size(); ++i) {
      old_attn[HeadGatesImpl::key(type, static_cast<int>(i))] = a[i].get();
      new_attn[HeadGatesImpl::key(type, static_cast<int>(i))] = b[i].get();
    }
  }
  for (auto& item : out->named_parameters(true)) {
    // Attention weights of the layers in `kept` change shape; they are rebuilt below.
    const auto& src = source.at(item.key());
    if (src.sizes() == item.value().sizes()) item.value().copy_(src);
  }
  for (const auto& [k, kv] : kept) {
    const auto& [keep, scale] = kv;
    const auto* a = old_attn.at(k);
    auto* b = new_attn.at(k);
    b->out_proj_bias.copy_(a->out_proj_bias);
    if (keep.empty()) continue;
    const int64_t hd = a->num_heads() * dh;
    std::vector<torch::Tensor> w, bias;
    for (int blk = 0; blk < 3; ++blk) {
      w.push_back(take_heads(a->in_proj_weight.narrow(0, blk * hd, hd), keep, dh, 0));
      bias.push_back(take_heads(a->in_proj_bias.narrow(0, blk * hd, hd), keep, dh, 0));
    }
    b->in_proj_weight.copy_(torch::cat(w, 0));
    b->in_proj_bias.copy_(torch::cat(bias, 0));
    // W_o columns of kept heads, each scaled by its gate value (folding fractional gates).
    auto wo = take_heads(a->out_proj_weight, keep, dh, 1).clone();  // [D, K*Dh]
    for (size_t j = 0; j < keep.size(); ++j) wo.narrow(1, j * dh, dh).mul_(scale[j]);
    b->out_proj_weight.copy_(wo);
  }
  return out;
}

}  // namespace headcount::prune
