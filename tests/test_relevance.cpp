// Layer-wise relevance propagation (analysis/relevance.h): the step rules by hand, conservation
// layer by layer, and a one-layer model's head relevances against a short independent
// implementation written here with autograd (gradient x input of each step's linearised function,
// the recipe of Montavon et al.'s LRP overview).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>

#include "headcount/analysis/relevance.h"
#include "headcount/model/transformer.h"

namespace headcount::analysis {
namespace {

using model::AttentionType;

torch::Tensor dt(std::vector<double> v) {
  return torch::tensor(v, torch::kDouble);
}

TEST(Relevance, StabiliserLinearAndAddByHand) {
  EXPECT_TRUE(torch::allclose(lrp_stabilize(dt({0, -1, 2}), 0.1), dt({0.1, -1.1, 2.1})));
  // z = W x + b = [1 + 2 + 0.5, 2 + 2] = [3.5, 4]; s = R / z = [3/3.5, 1];
  // R_x = x * (W^T s) = [1 * (6/7 + 2), 2 * (6/7 + 1)] = [20/7, 26/7]. The bias keeps 0.5 * 6/7.
  const auto x = dt({1, 2});
  const auto w = dt({1, 1, 2, 1}).view({2, 2});
  const auto r = dt({3, 4}).view({1, 2});
  const auto rx = lrp_linear(x, w, dt({0.5, 0}), r, 0.0);
  EXPECT_TRUE(torch::allclose(rx, dt({20.0 / 7, 26.0 / 7}).view({1, 2}), 1e-12, 1e-12)) << rx;
  EXPECT_NEAR(rx.sum().item<double>(), 7 - 0.5 * 3 / 3.5, 1e-12);
  // z = a + b = [4, -2]: R_a = [1 * 2/4, -3 * 4/-2], R_b = [3 * 2/4, 1 * 4/-2].
  const auto [ra, rb] = lrp_add(dt({1, -3}), dt({3, 1}), dt({2, 4}).view({1, 2}), 0.0);
  EXPECT_TRUE(torch::allclose(ra, dt({0.5, 6}).view({1, 2})));
  EXPECT_TRUE(torch::allclose(rb, dt({1.5, -2}).view({1, 2})));
}

// The epsilon rule's conservation: sum R_in = sum_j R_j * (z_j - bias_j) / stab(z_j).
TEST(Relevance, LayerNormAndAttentionValuesConserveUpToTheirBiasAndEpsilon) {
  torch::manual_seed(1);
  const double eps = 0.05;
  const auto y = torch::randn({3, 6}, torch::kDouble);
  const auto gamma = torch::rand({6}, torch::kDouble) + 0.5,
             beta = torch::randn({6}, torch::kDouble);
  const auto r = torch::randn({2, 3, 6}, torch::kDouble);
  const auto ry = lrp_layer_norm(y, gamma, beta, 1e-5, r, eps);
  const auto z = torch::layer_norm(y, {6}, gamma, beta, 1e-5);
  const auto kept = (r * (z - beta) / lrp_stabilize(z, eps)).sum({1, 2});
  EXPECT_TRUE(torch::allclose(ry.sum({1, 2}), kept, 1e-10, 1e-10));
  // Against autograd: gradient x input of the layer norm with sigma held constant.
  for (int64_t n = 0; n < 2; ++n) {
    auto a = y.clone().requires_grad_(true);
    const auto sigma = (y.var(-1, false, true) + 1e-5).sqrt();
    const auto zz = gamma * (a - a.mean(-1, true)) / sigma + beta;
    (zz * (r[n] / lrp_stabilize(z, eps))).sum().backward();
    EXPECT_TRUE(torch::allclose(ry[n], a * a.grad(), 1e-10, 1e-12));
  }
  // Attention values: no bias, so only the stabiliser's share is lost.
  const auto alpha = torch::softmax(torch::randn({2, 4, 5}, torch::kDouble), -1);
  const auto v = torch::randn({2, 5, 3}, torch::kDouble);
  const auto rc = torch::randn({3, 2, 4, 3}, torch::kDouble);
  const auto rv = lrp_attention_values(alpha, v, rc, 1e-9);
  EXPECT_EQ(rv.sizes(), (std::vector<int64_t>{3, 2, 5, 3}));
  EXPECT_TRUE(torch::allclose(rv.sum({1, 2, 3}), rc.sum({1, 2, 3}), 1e-6, 1e-6));
}

ModelConfig tiny(int layers, bool pre_norm) {
  ModelConfig c;
  c.d_model = 8;
  c.ffn_dim = 12;
  c.encoder_layers = layers;
  c.decoder_layers = layers;
  c.heads = 2;
  c.dropout = 0.0;
  c.pre_norm = pre_norm;
  return c;
}

void randomize(model::TransformerImpl& m, bool biases) {
  torch::NoGradGuard g;
  for (auto& item : m.named_parameters(true)) {
    const std::string& name = item.key();
    auto& p = item.value();
    const bool bias = name.find("bias") != std::string::npos;
    const bool norm = name.find("norm") != std::string::npos;
    if (bias) {
      biases ? p.normal_(0, 0.2) : p.zero_();
    } else if (norm) {
      p.uniform_(0.5, 1.5);
    } else {
      p.normal_(0, 0.4);
    }
  }
}

// With no biases and a vanishing stabiliser, every step passes on all the relevance it receives:
// the frontier equals the top logit after every step, down to the embeddings. Post- and
// pre-norm, with a pruned architecture that has a layer without heads.
TEST(Relevance, ConservedLayerByLayerWithoutBiases) {
  torch::manual_seed(2);
  for (bool pre_norm : {false, true}) {
    const auto c = tiny(2, pre_norm);
    auto arch = model::Architecture::uniform(c);
    arch.enc_dec = {2, 0};
    model::Transformer m(c, arch, 15, 15);
    m->to(torch::kDouble);
    m->eval();
    randomize(*m, false);
    const auto src = torch::tensor({5, 7, 9, 4, 2}, torch::kLong);
    const auto tgt = torch::tensor({1, 6, 8, 10}, torch::kLong);
    const auto tr = propagate_relevance(*m, src, tgt, 1e-12);
    ASSERT_EQ(tr.top.size(0), 4);
    EXPECT_TRUE((tr.top > 0).all().item<bool>()) << tr.top;
    ASSERT_GT(tr.frontier.size(), 10u);
    for (const auto& [name, f] : tr.frontier) {
      EXPECT_TRUE(torch::allclose(f, tr.top, 1e-7, 1e-9)) << name << " pre_norm " << pre_norm;
    }
    EXPECT_TRUE(torch::allclose(tr.src_input.sum(1) + tr.tgt_input.sum(1), tr.top, 1e-7, 1e-9));
    // Causality: output position n owes nothing to later target positions.
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t t = n + 1; t < 4; ++t) EXPECT_EQ(tr.tgt_input[n][t].item<double>(), 0.0);
    // The layer without heads holds no relevance; the top logits are the model's own.
    EXPECT_EQ(tr.heads[static_cast<int>(AttentionType::kEncDec)][1].size(1), 0);
    const auto logits = m->forward(src.unsqueeze(0), tgt.unsqueeze(0))[0];
    EXPECT_TRUE(torch::allclose(std::get<0>(logits.max(-1)), tr.top, 1e-10, 1e-10));
  }
}

// ---- The independent implementation: each step as an autograd function of its input. ----

// R_a = a * d/da [ f(a) . (R / stab(f(a))) ], the stabilised ratio held constant.
torch::Tensor step(const std::function<torch::Tensor(const torch::Tensor&)>& f,
                   const torch::Tensor& a, const torch::Tensor& r, double eps) {
  auto x = a.detach().clone().requires_grad_(true);
  const auto z = f(x);
  const auto zd = z.detach();
  const auto s =
      r / (zd + eps * torch::where(zd >= 0, torch::ones_like(zd), -torch::ones_like(zd)));
  (z * s).sum().backward();
  return (x * x.grad()).detach();
}

torch::Tensor ln_const(torch::nn::LayerNormImpl& ln, const torch::Tensor& y_const,
                       const torch::Tensor& y) {
  const auto sigma = (y_const.var(-1, false, true) + ln.options.eps()).sqrt();
  return ln.weight * (y - y.mean(-1, true)) / sigma + ln.bias;
}

struct Attn {
  torch::Tensor alpha, v, merged, out;  // [H, T, S], [H, S, Dh], [T, HD], [T, D]
};

Attn attend(model::MultiheadAttentionImpl& a, const torch::Tensor& q_in, const torch::Tensor& kv,
            const torch::Tensor& mask) {
  const int64_t H = a.num_heads(), Dh = a.head_dim(), HD = H * Dh;
  auto proj = [&](const torch::Tensor& x, int64_t k) {
    return torch::linear(x, a.in_proj_weight.narrow(0, k * HD, HD),
                         a.in_proj_bias.narrow(0, k * HD, HD))
        .view({x.size(0), H, Dh})
        .permute({1, 0, 2});
  };
  Attn r;
  auto scores = torch::matmul(proj(q_in, 0), proj(kv, 1).transpose(1, 2)) / std::sqrt(Dh * 1.0);
  if (mask.defined()) scores = scores + mask;
  r.alpha = torch::softmax(scores, -1);
  r.v = proj(kv, 2);
  r.merged = torch::matmul(r.alpha, r.v).permute({1, 0, 2}).reshape({q_in.size(0), HD});
  r.out = torch::linear(r.merged, a.out_proj_weight, a.out_proj_bias);
  return r;
}

// One output position's relevance through an attention layer: returns R of the key/value input,
// `head` gets the heads' relevance.
torch::Tensor attend_back(model::MultiheadAttentionImpl& a, const Attn& t, const torch::Tensor& kv,
                          const torch::Tensor& r_out, double eps, torch::Tensor* head) {
  const int64_t H = a.num_heads(), Dh = a.head_dim(), HD = H * Dh;
  const auto r_merged = step(
      [&](const torch::Tensor& m) { return torch::linear(m, a.out_proj_weight, a.out_proj_bias); },
      t.merged, r_out, eps);
  *head = r_merged.view({-1, H, Dh}).sum(std::vector<int64_t>{0, 2});
  const auto r_c = r_merged.view({-1, H, Dh}).permute({1, 0, 2});
  const auto r_v =
      step([&](const torch::Tensor& v) { return torch::matmul(t.alpha, v); }, t.v, r_c, eps);
  return step(
      [&](const torch::Tensor& x) {
        return torch::linear(x, a.in_proj_weight.narrow(0, 2 * HD, HD),
                             a.in_proj_bias.narrow(0, 2 * HD, HD));
      },
      kv, r_v.permute({1, 0, 2}).reshape({-1, HD}), eps);
}

// The post-norm residual block out = LN(x + f): (R_x through the residual, R_f).
std::pair<torch::Tensor, torch::Tensor> block_back(torch::nn::LayerNormImpl& ln,
                                                   const torch::Tensor& x, const torch::Tensor& f,
                                                   const torch::Tensor& r, double eps) {
  const auto y = x + f;
  const auto r_y = step([&](const torch::Tensor& a) { return ln_const(ln, y, a); }, y, r, eps);
  const auto r_x = step([&](const torch::Tensor& a) { return a + f; }, x, r_y, eps);
  const auto r_f = step([&](const torch::Tensor& a) { return x + a; }, f, r_y, eps);
  return {r_x, r_f};
}

torch::Tensor ffn_back(model::EncoderLayerImpl* e, model::DecoderLayerImpl* d,
                       const torch::Tensor& x, const torch::Tensor& r, double eps) {
  auto& fc1 = e ? *e->fc1 : *d->fc1;
  auto& fc2 = e ? *e->fc2 : *d->fc2;
  const auto h = torch::relu(fc1.forward(x));
  const auto r_h = step([&](const torch::Tensor& a) { return fc2.forward(a); }, h, r, eps);
  // ReLU passes relevance through: its input gets what its output got.
  return step([&](const torch::Tensor& a) { return fc1.forward(a); }, x, r_h, eps);
}

TEST(Relevance, OneLayerModelMatchesAnIndependentAutogradImplementation) {
  torch::manual_seed(3);
  const double eps = 0.01;
  const auto c = tiny(1, false);
  model::Transformer m(c, model::Architecture::uniform(c), 15, 15);
  m->to(torch::kDouble);
  m->eval();
  randomize(*m, true);
  // Only each step's own input carries a gradient.
  for (auto& p : m->parameters()) p.requires_grad_(false);
  const auto src = torch::tensor({5, 7, 9, 2}, torch::kLong);
  const auto tgt = torch::tensor({1, 6, 8}, torch::kLong);
  const auto tr = propagate_relevance(*m, src, tgt, eps);

  // Forward, by hand.
  auto& E = *m->encoder_layers[0];
  auto& Dl = *m->decoder_layers[0];
  const double scale = std::sqrt(8.0);
  const auto pos = model::sinusoidal_positions(4, 8).to(torch::kDouble);
  const auto e_tok = m->src_embed->weight.index_select(0, src) * scale;
  const auto e_pos = pos.narrow(0, 0, 4);
  const auto x0 = e_tok + e_pos;
  const auto a0 = attend(*E.self_attn, x0, x0, {});
  const auto x1 = E.self_attn_norm->forward(x0 + a0.out);
  const auto f1 = E.fc2->forward(torch::relu(E.fc1->forward(x1)));
  const auto mem = E.ffn_norm->forward(x1 + f1);
  const auto d_tok = m->tgt_embed->weight.index_select(0, tgt) * scale;
  const auto d_pos = pos.narrow(0, 0, 3);
  const auto y0 = d_tok + d_pos;
  const auto sa =
      attend(*Dl.self_attn, y0, y0, model::causal_bias(3, torch::kCPU).to(torch::kDouble));
  const auto y1 = Dl.self_attn_norm->forward(y0 + sa.out);
  const auto ca = attend(*Dl.cross_attn, y1, mem, {});
  const auto y2 = Dl.cross_attn_norm->forward(y1 + ca.out);
  const auto f2 = Dl.fc2->forward(torch::relu(Dl.fc1->forward(y2)));
  const auto y3 = Dl.ffn_norm->forward(y2 + f2);
  const auto logits = torch::linear(y3, m->output_weight);

  for (int64_t n = 0; n < 3; ++n) {
    const auto [top, k] = logits[n].max(0);
    EXPECT_NEAR(tr.top[n].item<double>(), top.item<double>(), 1e-10);
    auto r_top = torch::zeros({3, m->output_weight.size(0)}, torch::kDouble);
    r_top[n][k.item<int64_t>()] = top;
    // Only the top logit carries relevance: the output layer is linear without bias.
    auto r = step([&](const torch::Tensor& h) { return torch::linear(h, m->output_weight); }, y3,
                  r_top, eps);
    torch::Tensor h_self, h_cross, h_enc;
    auto [rx, rf] = block_back(*Dl.ffn_norm, y2, f2, r, eps);
    r = rx + ffn_back(nullptr, &Dl, y2, rf, eps);
    std::tie(rx, rf) = block_back(*Dl.cross_attn_norm, y1, ca.out, r, eps);
    const auto r_mem = attend_back(*Dl.cross_attn, ca, mem, rf, eps, &h_cross);
    r = rx;
    std::tie(rx, rf) = block_back(*Dl.self_attn_norm, y0, sa.out, r, eps);
    r = rx + attend_back(*Dl.self_attn, sa, y0, rf, eps, &h_self);
    const auto r_tgt = step([&](const torch::Tensor& a) { return a + d_pos; }, d_tok, r, eps) +
                       step([&](const torch::Tensor& a) { return d_tok + a; }, d_pos, r, eps);
    std::tie(rx, rf) = block_back(*E.ffn_norm, x1, f1, r_mem, eps);
    r = rx + ffn_back(&E, nullptr, x1, rf, eps);
    std::tie(rx, rf) = block_back(*E.self_attn_norm, x0, a0.out, r, eps);
    r = rx + attend_back(*E.self_attn, a0, x0, rf, eps, &h_enc);
    const auto r_src = step([&](const torch::Tensor& a) { return a + e_pos; }, e_tok, r, eps) +
                       step([&](const torch::Tensor& a) { return e_tok + a; }, e_pos, r, eps);

    auto near = [](const torch::Tensor& a, const torch::Tensor& b) {
      return torch::allclose(a, b, 1e-8, 1e-10);
    };
    EXPECT_TRUE(near(tr.heads[static_cast<int>(AttentionType::kDecSelf)][0][n], h_self)) << n;
    EXPECT_TRUE(near(tr.heads[static_cast<int>(AttentionType::kEncDec)][0][n], h_cross)) << n;
    EXPECT_TRUE(near(tr.heads[static_cast<int>(AttentionType::kEncSelf)][0][n], h_enc))
        << n << "\n"
        << tr.heads[0][0][n] << "\n"
        << h_enc;
    EXPECT_TRUE(near(tr.tgt_input[n], r_tgt.sum(-1))) << n;
    EXPECT_TRUE(near(tr.src_input[n], r_src.sum(-1))) << n;
  }
  const auto reached = (tr.src_input.sum(1) + tr.tgt_input.sum(1)) / tr.top;
  EXPECT_TRUE(torch::isfinite(reached).all().item<bool>()) << reached;
}

}  // namespace
}  // namespace headcount::analysis
