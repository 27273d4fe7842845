// headcount's attention and Transformer against LibTorch's own modules and against themselves
// (incremental decoding, zero-head layers, head scales).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "headcount/common/check.h"
#include "headcount/data/vocab.h"
#include "headcount/model/attention.h"
#include "headcount/model/batched_matmul.h"
#include "headcount/model/transformer.h"

namespace headcount {
namespace {

using model::MultiheadAttention;

constexpr int64_t B = 3, T = 5, S = 7, D = 16, H = 4;

// Copies headcount's attention weights into LibTorch's MultiheadAttention.
torch::nn::MultiheadAttention reference_from(const MultiheadAttention& mine) {
  torch::nn::MultiheadAttention ref(torch::nn::MultiheadAttentionOptions(D, H));
  torch::NoGradGuard g;
  ref->in_proj_weight.copy_(mine->in_proj_weight);
  ref->in_proj_bias.copy_(mine->in_proj_bias);
  ref->out_proj->weight.copy_(mine->out_proj_weight);
  ref->out_proj->bias.copy_(mine->out_proj_bias);
  return ref;
}

void randomize(MultiheadAttention& m) {
  torch::NoGradGuard g;
  for (auto& p : m->parameters()) p.normal_(0, 0.3);
}

// Values and gradients of the batched product against torch::matmul, for the layouts attention
// uses (transposed views of [B, T, H, Dh] projections), row counts that are not a multiple of the
// kernel's four, single-row queries (incremental decoding), and 3-D inputs.
TEST(BatchedMatmul, MatchesTorchMatmulValuesAndGradients) {
  torch::manual_seed(3);
  struct Case {
    std::vector<int64_t> a_shape, b_shape;
    bool a_transposed, b_transposed;  // build the operand as a transposed view
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 4}, {2, 3, 4, 6}, false, false}, {{2, 3, 8, 4}, {2, 3, 4, 8}, true, true},
      {{2, 3, 1, 4}, {2, 3, 4, 9}, false, true},  {{2, 3, 7, 13}, {2, 3, 13, 3}, true, false},
      {{5, 6, 2}, {5, 2, 11}, false, false},      {{4, 9, 5}, {4, 5, 4}, true, true},
  };
  for (const auto& c : cases) {
    // A transposed view: allocate the transposed shape and swap the last two dims back.
    auto make = [](std::vector<int64_t> shape, bool transposed) {
      if (!transposed) return torch::randn(shape);
      std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
      return torch::randn(shape).transpose(-2, -1);
    };
    const auto a0 = make(c.a_shape, c.a_transposed), b0 = make(c.b_shape, c.b_transposed);
    auto a = a0.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
    auto a_ref = a0.detach().clone().requires_grad_(true);
    auto b_ref = b0.detach().clone().requires_grad_(true);
    ASSERT_TRUE(model::batched_matmul_fast_path(a, b));
    const auto out = model::batched_matmul(a, b);
    const auto ref = torch::matmul(a_ref, b_ref);
    ASSERT_EQ(out.sizes(), ref.sizes());
    EXPECT_TRUE(torch::allclose(out, ref, 1e-5, 1e-5));
    // A non-contiguous upstream gradient, as the backward of a transpose produces.
    auto g = torch::randn(ref.sizes().vec());
    out.backward(g);
    ref.backward(g);
    EXPECT_TRUE(torch::allclose(a.grad(), a_ref.grad(), 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(b.grad(), b_ref.grad(), 1e-5, 1e-5));
  }
  // Only one operand needing a gradient, and no gradient mode at all.
  auto a = torch::randn({2, 2, 3, 4}), b = torch::randn({2, 2, 4, 5}).requires_grad_(true);
  model::batched_matmul(a, b).sum().backward();
  EXPECT_TRUE(torch::allclose(
      b.grad(), torch::matmul(a.transpose(-2, -1), torch::ones({2, 2, 3, 5})), 1e-5, 1e-5));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(model::batched_matmul(a, b), torch::matmul(a, b), 1e-5, 1e-5));
}

TEST(BatchedMatmul, OtherDtypesAndShapesFallBackToTorchMatmul) {
  auto a = torch::randn({2, 3, 4}, torch::kFloat64), b = torch::randn({2, 4, 5}, torch::kFloat64);
  EXPECT_FALSE(model::batched_matmul_fast_path(a, b));
  EXPECT_TRUE(torch::allclose(model::batched_matmul(a, b), torch::matmul(a, b)));
  auto x = torch::randn({3, 4}), y = torch::randn({2, 4, 5});  // broadcasting
  EXPECT_FALSE(model::batched_matmul_fast_path(x, y));
  EXPECT_TRUE(torch::allclose(model::batched_matmul(x, y), torch::matmul(x, y)));
  auto z = torch::randn({1, 3, 4}), w = torch::randn({2, 4, 5});  // batch sizes differ
  EXPECT_FALSE(model::batched_matmul_fast_path(z, w));
  EXPECT_TRUE(torch::allclose(model::batched_matmul(z, w), torch::matmul(z, w)));
}

TEST(Attention, MatchesLibTorchSelfAttentionWithPaddingAndCausalMask) {
  torch::manual_seed(0);
  MultiheadAttention mine(D, H, D / H, 0.0, true);
  randomize(mine);
  auto ref = reference_from(mine);
  auto x = torch::randn({B, T, D}, torch::requires_grad());
  auto x_ref = x.detach().clone().requires_grad_(true);
  auto pad = torch::zeros({B, T}, torch::kBool);
  pad[1][4] = true;  // sentence 1 has 4 tokens, sentence 2 has 3
  pad[2][3] = true;
  pad[2][4] = true;
  auto causal = model::causal_bias(T, torch::kCPU);
  auto bias = causal.view({1, 1, T, T}) +
              torch::zeros({B, T}).masked_fill(pad, -INFINITY).view({B, 1, 1, T});
  auto out = mine->forward(x, x, bias);  // [B, T, D]
  auto xt = x_ref.transpose(0, 1);       // LibTorch wants [T, B, D]
  auto ref_out = std::get<0>(ref->forward(xt, xt, xt, pad, false, causal)).transpose(0, 1);
  EXPECT_TRUE(torch::allclose(out, ref_out, 1e-5, 1e-5)) << (out - ref_out).abs().max();
  // Gradients with respect to the input and every weight.
  auto w = torch::randn({B, T, D});
  (out * w).sum().backward();
  (ref_out * w).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), x_ref.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(mine->in_proj_weight.grad(), ref->in_proj_weight.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(mine->in_proj_bias.grad(), ref->in_proj_bias.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(
      torch::allclose(mine->out_proj_weight.grad(), ref->out_proj->weight.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(mine->out_proj_bias.grad(), ref->out_proj->bias.grad(), 1e-4, 1e-5));
}

TEST(Attention, MatchesLibTorchCrossAttention) {
  torch::manual_seed(1);
  MultiheadAttention mine(D, H, D / H, 0.0, false);
  randomize(mine);
  auto ref = reference_from(mine);
  auto q = torch::randn({B, T, D});
  auto mem = torch::randn({B, S, D});
  auto pad = torch::zeros({B, S}, torch::kBool);
  pad[0][6] = true;
  pad[2][5] = true;
  pad[2][6] = true;
  auto bias = torch::zeros({B, S}).masked_fill(pad, -INFINITY).view({B, 1, 1, S});
  mine->set_record(true);
  auto out = mine->forward(q, mem, bias);
  auto memt = mem.transpose(0, 1);
  auto [ref_out, ref_w] = ref->forward(q.transpose(0, 1), memt, memt, pad, true);
  EXPECT_TRUE(torch::allclose(out, ref_out.transpose(0, 1), 1e-5, 1e-5));
  // LibTorch returns the weights averaged over heads.
  EXPECT_TRUE(torch::allclose(mine->last_weights().mean(1), ref_w, 1e-5, 1e-6));
  // No attention goes to padding.
  EXPECT_EQ(mine->last_weights()[2].narrow(-1, 5, 2).abs().max().item<float>(), 0.0f);
}

TEST(Attention, HeadScaleActsOnHeadOutputsBeforeTheProjection) {
  torch::manual_seed(2);
  MultiheadAttention m(D, H, D / H, 0.0, true);
  randomize(m);
  auto x = torch::randn({B, T, D});
  // Switching head 1 off equals zeroing its columns of the output projection.
  m->set_head_scale(torch::tensor({1.0f, 0.0f, 1.0f, 1.0f}));
  auto scaled = m->forward(x, x, {});
  m->set_head_scale({});
  {
    torch::NoGradGuard g;
    m->out_proj_weight.narrow(1, 1 * (D / H), D / H).zero_();
  }
  auto zeroed = m->forward(x, x, {});
  EXPECT_TRUE(torch::allclose(scaled, zeroed, 1e-5, 1e-6));
  // A per-example scale [B, H] and its gradient (Michel et al.'s importance is |dL/dscale|).
  auto xi = torch::ones({B, H}, torch::requires_grad());
  m->set_head_scale(xi);
  m->forward(x, x, {}).sum().backward();
  EXPECT_EQ(xi.grad().sizes(), (std::vector<int64_t>{B, H}));
  EXPECT_EQ(xi.grad().select(1, 1).abs().sum().item<float>(), 0.0f);  // its W_o columns are 0
  EXPECT_GT(xi.grad().select(1, 0).abs().sum().item<float>(), 0.0f);
}

TEST(Attention, ZeroHeadsStillAddsTheOutputBias) {
  MultiheadAttention m(D, 0, 4, 0.0, true);
  EXPECT_EQ(m->parameters().size(), 1u);  // only out_proj_bias: no zero-width weights
  {
    torch::NoGradGuard g;
    m->out_proj_bias.fill_(0.5);
  }
  auto out = m->forward(torch::randn({B, T, D}), {}, {});
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{B, T, D}));
  EXPECT_TRUE(torch::allclose(out, torch::full({B, T, D}, 0.5f)));
}

TEST(Attention, IncrementalSelfAttentionEqualsCausalFullPass) {
  torch::manual_seed(3);
  MultiheadAttention m(D, H, D / H, 0.0, true);
  randomize(m);
  auto x = torch::randn({B, T, D});
  auto full = m->forward(x, x, model::causal_bias(T, torch::kCPU));
  model::KVCache cache;
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < T; ++t) {
    auto xt = x.narrow(1, t, 1);
    steps.push_back(m->forward(xt, xt, {}, &cache));
  }
  EXPECT_TRUE(torch::allclose(full, torch::cat(steps, 1), 1e-5, 1e-6));
}

ModelConfig tiny_config() {
  ModelConfig c;
  c.d_model = 16;
  c.ffn_dim = 32;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.heads = 4;
  c.dropout = 0.0;
  return c;
}

TEST(Transformer, IncrementalDecodingEqualsTeacherForcing) {
  torch::manual_seed(4);
  for (bool pre_norm : {false, true}) {
    auto c = tiny_config();
    c.pre_norm = pre_norm;
    model::Transformer m(c, model::Architecture::uniform(c), 20, 20);
    m->eval();
    auto src = torch::randint(4, 20, {B, S});
    src[1][6] = data::kPadId;
    auto tgt = torch::randint(4, 20, {B, T});
    auto full = m->forward(src, tgt);  // [B, T, V]
    auto enc = m->encode(src);
    auto state = m->start_state();
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < T; ++t) steps.push_back(m->decode(tgt.narrow(1, t, 1), enc, &state));
    EXPECT_TRUE(torch::allclose(full, torch::cat(steps, 1), 1e-4, 1e-5)) << "pre_norm " << pre_norm;
    // Future target tokens do not change earlier logits.
    auto changed = tgt.clone();
    changed[0][4] = 5;
    auto other = m->forward(src, changed);
    EXPECT_TRUE(torch::allclose(full.narrow(1, 0, 4), other.narrow(1, 0, 4), 1e-5, 1e-6));
  }
}

// The trace of a forward pass (what relevance propagation reads) holds what the model computed:
// each sublayer rebuilt from its traced pieces with plain LibTorch ops gives the next one's input,
// and the traced final state gives the logits. Post- and pre-norm, a layer without heads.
TEST(Transformer, ForwardTraceHoldsWhatTheModelComputed) {
  torch::manual_seed(6);
  namespace F = torch::nn::functional;
  for (bool pre_norm : {false, true}) {
    auto c = tiny_config();
    c.pre_norm = pre_norm;
    auto arch = model::Architecture::uniform(c);
    arch.enc_dec = {4, 0};
    model::Transformer m(c, arch, 20, 20);
    m->eval();
    auto src = torch::randint(4, 20, {B, S});
    src[2][6] = data::kPadId;
    const auto tgt = torch::randint(4, 20, {B, T});
    model::ForwardTrace tr;
    const auto logits = m->decode(tgt, m->encode(src, &tr), nullptr, &tr);
    EXPECT_TRUE(torch::allclose(logits, m->forward(src, tgt), 1e-6, 1e-6));
    auto ln = [&](torch::nn::LayerNorm& n, const torch::Tensor& x) {
      return F::layer_norm(x, F::LayerNormFuncOptions({D}).weight(n->weight).bias(n->bias));
    };
    // A sublayer's output from its trace: the residual sum, normed after (post) or not (pre).
    auto out = [&](torch::nn::LayerNorm& n, const model::SublayerTrace& t) {
      EXPECT_TRUE(torch::allclose(t.input, pre_norm ? ln(n, t.x) : t.x, 1e-5, 1e-6));
      return pre_norm ? t.x + t.f : ln(n, t.x + t.f);
    };
    auto attention = [&](MultiheadAttention& a, const model::SublayerTrace& t) {
      if (a->num_heads() == 0) return a->out_proj_bias.expand({B, t.x.size(1), D});
      const auto& at = t.attention;
      const auto heads = torch::matmul(at.weights, at.values);  // [B, H, L, Dh]
      EXPECT_TRUE(
          torch::allclose(heads.transpose(1, 2).reshape_as(at.heads), at.heads, 1e-5, 1e-6));
      return torch::linear(at.heads, a->out_proj_weight, a->out_proj_bias);
    };
    auto ffn = [&](auto& layer, const model::SublayerTrace& t) {
      EXPECT_TRUE(torch::allclose(t.hidden, torch::relu(layer->fc1(t.input)), 1e-5, 1e-6));
      return layer->fc2(t.hidden);
    };
    auto x = tr.src_tokens + tr.src_positions;
    for (size_t l = 0; l < m->encoder_layers.size(); ++l) {
      auto& L = m->encoder_layers[l];
      const auto& t = tr.encoder[l];
      EXPECT_TRUE(torch::allclose(t.self_attn.x, x, 1e-5, 1e-5)) << l;
      EXPECT_TRUE(torch::allclose(t.self_attn.f, attention(L->self_attn, t.self_attn), 1e-5, 1e-5));
      EXPECT_TRUE(torch::allclose(t.ffn.x, out(L->self_attn_norm, t.self_attn), 1e-5, 1e-5));
      EXPECT_TRUE(torch::allclose(t.ffn.f, ffn(L, t.ffn), 1e-5, 1e-5));
      x = out(L->ffn_norm, t.ffn);
    }
    EXPECT_TRUE(torch::allclose(tr.encoder_out, x, 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(tr.memory, pre_norm ? ln(m->encoder_norm, x) : x, 1e-5, 1e-5));
    x = tr.tgt_tokens + tr.tgt_positions;
    for (size_t l = 0; l < m->decoder_layers.size(); ++l) {
      auto& L = m->decoder_layers[l];
      const auto& t = tr.decoder[l];
      EXPECT_TRUE(torch::allclose(t.self_attn.x, x, 1e-5, 1e-5)) << l;
      EXPECT_TRUE(torch::allclose(t.self_attn.f, attention(L->self_attn, t.self_attn), 1e-5, 1e-5));
      EXPECT_TRUE(torch::allclose(t.cross_attn.x, out(L->self_attn_norm, t.self_attn), 1e-5, 1e-5));
      EXPECT_TRUE(
          torch::allclose(t.cross_attn.f, attention(L->cross_attn, t.cross_attn), 1e-5, 1e-5));
      EXPECT_TRUE(torch::allclose(t.ffn.x, out(L->cross_attn_norm, t.cross_attn), 1e-5, 1e-5));
      x = out(L->ffn_norm, t.ffn);
    }
    EXPECT_TRUE(torch::allclose(tr.decoder_out, x, 1e-5, 1e-5));
    EXPECT_TRUE(tr.decoder[1].cross_attn.attention.weights.numel() == 0 ||
                !tr.decoder[1].cross_attn.attention.weights.defined());
    const auto h = pre_norm ? ln(m->decoder_norm, x) : x;
    EXPECT_TRUE(torch::allclose(torch::linear(h, m->output_weight), logits, 1e-4, 1e-5));
    // Causal self-attention: no weight on a later position.
    const auto w = tr.decoder[0].self_attn.attention.weights;  // [B, H, T, T]
    EXPECT_EQ(torch::triu(w, 1).abs().max().item<float>(), 0.0f);
  }
}

TEST(Transformer, PrunedArchitecturesAndTiedEmbeddings) {
  auto c = tiny_config();
  model::Architecture a = model::Architecture::uniform(c);
  a.enc_self = {3, 0};
  a.dec_self = {4, 1};
  a.enc_dec = {0, 2};
  model::Transformer m(c, a, 20, 20);
  EXPECT_EQ(a.summary(), "3/5/2");
  EXPECT_EQ(m->encoder_layers[0]->self_attn->in_proj_weight.sizes(),
            (std::vector<int64_t>{3 * 3 * 4, 16}));
  EXPECT_EQ(m->attention_layers(model::AttentionType::kEncDec)[0]->num_heads(), 0);
  auto logits = m->forward(torch::randint(4, 20, {2, 6}), torch::randint(4, 20, {2, 4}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 4, 20}));
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  // Tied: one matrix for source, target and output.
  EXPECT_TRUE(m->output_weight.is_same(m->src_embed->weight));
  EXPECT_TRUE(m->tgt_embed->weight.is_same(m->src_embed->weight));
  // Names are stable and readable.
  bool found = false;
  for (const auto& [name, t] : model::named_weights(*m)) {
    found = found || name == "decoder.1.cross_attn.in_proj_weight";
  }
  EXPECT_TRUE(found);
}

TEST(Transformer, LoadWeightsRejectsAnotherArchitecture) {
  auto c = tiny_config();
  model::Transformer full(c, model::Architecture::uniform(c), 20, 20);
  auto a = model::Architecture::uniform(c);
  a.enc_self = {2, 4};
  model::Transformer pruned(c, a, 20, 20);
  try {
    model::load_weights(*pruned, model::named_weights(*full), "ckpt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.0.self_attn.in_proj_weight"), std::string::npos)
        << e.what();
  }
}

TEST(Transformer, SinusoidalPositionsByFormula) {
  auto p = model::sinusoidal_positions(50, 8);
  EXPECT_NEAR(p[7][0].item<float>(), std::sin(7.0), 1e-6);
  EXPECT_NEAR(p[7][1].item<float>(), std::cos(7.0), 1e-6);
  EXPECT_NEAR(p[7][4].item<float>(), std::sin(7.0 / std::pow(10000.0, 4.0 / 8)), 1e-6);
  EXPECT_NEAR(p[7][5].item<float>(), std::cos(7.0 / std::pow(10000.0, 4.0 / 8)), 1e-6);
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

// Runs only where LibTorch sees a GPU (the official CUDA build); skipped here.
TEST(Cuda, ModelGivesTheSameLogitsOnGpuAndCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(6);
  auto c = tiny_config();
  model::Transformer m(c, model::Architecture::uniform(c), 20, 20);
  m->eval();
  auto src = torch::randint(4, 20, {2, 6});
  auto tgt = torch::randint(4, 20, {2, 4});
  auto cpu = m->forward(src, tgt);
  m->to(torch::kCUDA);
  auto gpu = m->forward(src.to(torch::kCUDA), tgt.to(torch::kCUDA)).to(torch::kCPU);
  EXPECT_TRUE(torch::allclose(cpu, gpu, 1e-4, 1e-4));
}

}  // namespace
}  // namespace headcount

#include "headcount/model/dropout.h"

namespace headcount {
namespace {

TEST(Dropout, StatisticsScalingGradientAndReproducibility) {
  torch::manual_seed(11);
  auto x = torch::ones({1000, 1001}, torch::requires_grad());  // odd size: the tail path too
  auto y = model::dropout(x, 0.3, true);
  const double zero_share = y.eq(0).to(torch::kFloat64).mean().item<double>();
  // 1,001,000 Bernoulli(0.3) draws: standard error 0.00046.
  EXPECT_NEAR(zero_share, 0.3, 0.003);
  // Kept elements are scaled by 1 / (1 - p) exactly.
  const auto kept = y.masked_select(y.ne(0));
  EXPECT_TRUE(torch::allclose(kept, torch::full_like(kept, 1.0 / 0.7)));
  // dy/dx is the mask.
  y.sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), y.detach()));
  // Eval is the identity; the same seed gives the same mask; the tail elements vary too.
  EXPECT_TRUE(model::dropout(x, 0.3, false).is_same(x));
  torch::manual_seed(5);
  auto a = model::dropout(torch::ones({7}), 0.5, true);
  torch::manual_seed(5);
  auto b = model::dropout(torch::ones({7}), 0.5, true);
  EXPECT_TRUE(torch::equal(a, b));
  auto c = model::dropout(torch::ones({7}), 0.5, true);
  EXPECT_FALSE(torch::equal(a, c));
  // bf16 input (mixed precision): kept elements are x / (1 - p) in fp32, not a bf16-rounded
  // scale (1 / 0.9 is 1.109375 in bf16), and the gradient reaches x in bf16.
  auto h = torch::full({64, 33}, 1.5, torch::kBFloat16).requires_grad_(true);
  auto d = model::dropout(h, 0.1, true);
  EXPECT_EQ(d.scalar_type(), torch::kFloat32);
  const auto hk = d.masked_select(d.ne(0));
  EXPECT_GT(hk.numel(), 0);
  const float scale = static_cast<float>(1.0 / 0.9);  // the fp32 scale of every kept element
  EXPECT_TRUE(torch::equal(hk, torch::full_like(hk, 1.5f * scale)));
  d.sum().backward();
  EXPECT_EQ(h.grad().scalar_type(), torch::kBFloat16);
}

// The mask is a function of the seed and the element's position (drawn again in the backward
// pass, in parallel): adjacent elements are independent, the mask does not depend on the thread
// count, and the gradient of a bf16 input is LibTorch's own product grad * mask rounded to bf16.
TEST(Dropout, MaskIsIndependentThreadCountFreeAndItsGradientIsLibTorchs) {
  const int threads = at::get_num_threads();
  torch::manual_seed(3);
  const auto ones = torch::ones({1 << 20});
  const auto y = model::dropout(ones, 0.5, true);
  const auto kept = y.ne(0).to(torch::kFloat64);
  // Pairs of neighbours and of elements 4 apart both kept: 1/4 each (standard error 0.0004).
  const double both1 = (kept.slice(0, 0, -1) * kept.slice(0, 1)).mean().item<double>();
  const double both4 = (kept.slice(0, 0, -4) * kept.slice(0, 4)).mean().item<double>();
  EXPECT_NEAR(both1, 0.25, 0.003);
  EXPECT_NEAR(both4, 0.25, 0.003);
  // The same seed on one thread and on two gives the same mask.
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    torch::manual_seed(3);
    EXPECT_TRUE(torch::equal(model::dropout(ones, 0.5, true), y)) << t << " thread(s)";
  }
  at::set_num_threads(threads);
  // bf16 in, fp32 out: float(x) * mask exactly; the gradient: (g * mask) rounded to bf16.
  torch::manual_seed(4);
  const auto x32 = torch::randn({257, 129});
  auto x = x32.to(torch::kBFloat16).requires_grad_(true);
  torch::manual_seed(9);
  auto out = model::dropout(x, 0.2, true);
  torch::manual_seed(9);
  const auto mask = model::dropout(torch::ones({257, 129}), 0.2, true);  // 0 or 1 / 0.8
  EXPECT_TRUE(torch::equal(out, x.detach().to(torch::kFloat32) * mask));
  const auto g = torch::randn({257, 129});
  out.backward(g);
  EXPECT_TRUE(torch::equal(x.grad(), (g * mask).to(torch::kBFloat16)));
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

// Decoding FLOPs counted by hand from the matmul shapes of a tiny architecture: d=4, FFN 8,
// head width 2, vocabulary 10; encoder 1 head, decoder self-attention 2 heads, no
// encoder-decoder heads; one sentence of 3 source tokens translated into 2 tokens.
TEST(DecodeFlops, CountedByHandFromTheMatmulShapes) {
  ModelConfig m;
  m.d_model = 4;
  m.ffn_dim = 8;
  model::Architecture a;
  a.enc_self = {1};
  a.dec_self = {2};
  a.enc_dec = {0};
  a.head_dim = 2;
  // Encoder, 3 tokens: Q,K,V [3x4]@[4x6] = 72 MACs; scores [3x2]@[2x3] = 18 and sums [3x3]@[3x2]
  // = 18; output [3x2]@[2x4] = 24; FFN [3x4]@[4x8] + [3x8]@[8x4] = 192. 324 MACs = 648 FLOPs.
  const double encoder = 2 * (72 + 18 + 18 + 24 + 192);
  // Decoder, 2 steps of one row. Step t: Q,K,V [1x4]@[4x12] = 48; scores and sums over t keys with
  // 2 heads of width 2: 2 * 2*2*t = 8t; output [1x4]@[4x4] = 16; FFN 64; logits [1x4]@[4x10] = 40.
  const double step1 = 48 + 8 * 1 + 16 + 64 + 40, step2 = 48 + 8 * 2 + 16 + 64 + 40;
  const double decoder = 2 * (step1 + step2);
  EXPECT_DOUBLE_EQ(model::decode_flops(a, m, 10, {3}, {2}, 1), encoder + decoder);
  // A beam of 2 doubles the decoder's work, not the encoder's.
  EXPECT_DOUBLE_EQ(model::decode_flops(a, m, 10, {3}, {2}, 2), encoder + 2 * decoder);
  // Encoder-decoder heads add the source keys/values once per row and the cross-attention.
  a.enc_dec = {1};
  // Keys and values of 3 source tokens: [3x4]@[4x4] = 48; per step: query [1x4]@[4x2] = 8,
  // scores and sums over 3 keys 2*2*3 = 12, output [1x2]@[2x4] = 8.
  EXPECT_DOUBLE_EQ(model::decode_flops(a, m, 10, {3}, {2}, 1),
                   encoder + decoder + 2 * (48 + 2 * (8 + 12 + 8)));
}

}  // namespace
}  // namespace headcount
