// Hard-Concrete gates against closed forms and an independent numerical integral; lambda
// schedules and the Lagrangian target ramp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "headcount/common/check.h"
#include "headcount/prune/gates.h"
#include "headcount/prune/schedule.h"

namespace headcount {
namespace {

using prune::HardConcreteGate;
using prune::HardConcreteOptions;

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

HardConcreteGate gate_with(std::vector<float> log_alpha, HardConcreteOptions o = {}) {
  HardConcreteGate g(static_cast<int64_t>(log_alpha.size()), o);
  torch::NoGradGuard ng;
  g->log_alpha.copy_(torch::tensor(log_alpha));
  return g;
}

TEST(Gates, POpenClosedForm) {
  const double beta = 0.33, l = -0.1, r = 1.1;
  const std::vector<float> la = {-5.0f, -1.0f, 0.0f, 0.7f, 4.0f};
  auto g = gate_with(la);
  const auto p = g->p_open();
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_NEAR(p[i].item<double>(), sigmoid(la[i] - beta * std::log(-l / r)), 1e-6) << la[i];
  }
  EXPECT_NEAR(g->penalty().item<double>(), p.sum().item<double>(), 1e-6);
  // At log_alpha 0, P_open = sigmoid(0.33 ln 11) = sigmoid(0.79131) = 0.68811
  EXPECT_NEAR(p[2].item<double>(), 0.68811, 1e-5);
}

TEST(Gates, EvalGateIsExactlyZeroAndOneBeyondTheThresholds) {
  const double closed = std::log(1.0 / 11.0), open = std::log(11.0);
  auto g = gate_with({static_cast<float>(closed), static_cast<float>(closed) - 1e-3f, -10.0f,
                      static_cast<float>(open), static_cast<float>(open) + 1e-3f, 10.0f, 0.0f,
                      static_cast<float>(closed) + 0.05f});
  EXPECT_DOUBLE_EQ(g->closed_threshold(), closed);
  EXPECT_DOUBLE_EQ(g->open_threshold(), open);
  const auto e = g->eval_gate();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(e[i].item<float>(), 0.0f) << i;
  for (int i = 3; i < 6; ++i) EXPECT_EQ(e[i].item<float>(), 1.0f) << i;
  EXPECT_NEAR(e[6].item<double>(), 0.5 * 1.2 - 0.1, 1e-7);  // sigmoid(0) (r - l) + l
  EXPECT_GT(e[7].item<float>(), 0.0f);                      // just above: fractional
  EXPECT_LT(e[7].item<float>(), 0.1f);
  // The default initialisation opens every gate fully: the converged model is unchanged.
  HardConcreteGate fresh(8);
  EXPECT_TRUE(torch::equal(fresh->eval_gate(), torch::ones({8})));
  fresh->eval();
  EXPECT_TRUE(torch::equal(fresh->forward(3), torch::ones({8})));
}

// E[g], P(g = 0) and P(g = 1) by a midpoint rule over u, independent of the tensor code.
struct Moments {
  double mean = 0, p_zero = 0, p_one = 0;
};
Moments integrate(double la, double beta, double l, double r) {
  const int n = 2000000;
  Moments m;
  for (int i = 0; i < n; ++i) {
    const double u = (i + 0.5) / n;
    const double s = sigmoid((std::log(u) - std::log(1 - u) + la) / beta);
    const double g = std::min(1.0, std::max(0.0, s * (r - l) + l));
    m.mean += g / n;
    m.p_zero += (g == 0.0) / static_cast<double>(n);
    m.p_one += (g == 1.0) / static_cast<double>(n);
  }
  return m;
}

TEST(Gates, MonteCarloMatchesTheAnalyticDistribution) {
  torch::manual_seed(0);
  const double beta = 0.33, l = -0.1, r = 1.1;
  for (double la : {-1.0, 0.0, 0.8}) {
    auto g = gate_with({static_cast<float>(la)});
    g->train();
    const int64_t n = 200000;
    HardConcreteOptions o;
    o.noise = GateNoise::kExample;
    auto ge = gate_with({static_cast<float>(la)}, o);
    const auto samples = ge->sample(n).squeeze(1);  // [n]
    const auto m = integrate(la, beta, l, r);
    const double mc_mean = samples.mean().item<double>();
    const double sd = samples.std().item<double>() / std::sqrt(static_cast<double>(n));
    EXPECT_NEAR(mc_mean, m.mean, 4 * sd + 1e-4) << "log_alpha " << la;
    // P(g > 0) is P_open; P(g = 1) has its own closed form.
    EXPECT_NEAR(1 - m.p_zero, g->p_open().item<double>(), 1e-4);
    EXPECT_NEAR(m.p_one, sigmoid(la - beta * std::log((1 - l) / (r - 1))), 1e-4);
    EXPECT_NEAR(samples.eq(0).to(torch::kFloat64).mean().item<double>(), m.p_zero, 0.005);
    EXPECT_NEAR(samples.eq(1).to(torch::kFloat64).mean().item<double>(), m.p_one, 0.005);
  }
}

// E[g], which keeps a closed head in a target-count export, against the integral over the noise
// u (integrate(), another variable and rule), Monte Carlo, and symmetry: with l + r = 1 and
// log_alpha 0 the gate is distributed symmetrically about 1/2.
TEST(Gates, ExpectedGateMatchesTheIntegralOverTheNoise) {
  torch::manual_seed(1);
  const double beta = 0.33, l = -0.1, r = 1.1;
  const std::vector<float> las = {-6.0f, -3.0f, -2.4f, -1.0f, 0.0f, 0.8f, 3.0f};
  const auto e = gate_with(las)->expected_gate();
  ASSERT_EQ(e.size(0), static_cast<int64_t>(las.size()));
  EXPECT_FALSE(e.requires_grad());
  for (size_t i = 0; i < las.size(); ++i) {
    const auto m = integrate(las[i], beta, l, r);
    EXPECT_NEAR(e[i].item<double>(), m.mean, 1e-4) << "log_alpha " << las[i];
  }
  EXPECT_NEAR(e[4].item<double>(), 0.5, 1e-6);
  // Closed heads (eval gate 0) still have a small positive expectation, increasing in log_alpha.
  EXPECT_GT(e[0].item<double>(), 0.0);
  EXPECT_LT(e[0].item<double>(), e[1].item<double>());
  EXPECT_LT(e[2].item<double>(), 0.1);
  HardConcreteOptions o;
  o.noise = GateNoise::kExample;
  const auto samples = gate_with({-3.0f}, o)->sample(200000).squeeze(1);
  const double sd = samples.std().item<double>() / std::sqrt(200000.0);
  EXPECT_NEAR(samples.mean().item<double>(), e[1].item<double>(), 4 * sd + 1e-4);
}

TEST(Gates, NoiseGranularityShapes) {
  HardConcreteGate per_head(5);
  per_head->train();
  EXPECT_EQ(per_head->forward(7).sizes(), (std::vector<int64_t>{5}));
  HardConcreteOptions o;
  o.noise = GateNoise::kExample;
  HardConcreteGate per_example(5, o);
  per_example->train();
  EXPECT_EQ(per_example->forward(7).sizes(), (std::vector<int64_t>{7, 5}));
  // Names are parsed once, when the config is read: an unknown one is an error naming the key.
  EXPECT_EQ(parse_choice<GateNoise>("example", "prune.noise"), GateNoise::kExample);
  try {
    parse_choice<GateNoise>("token", "prune.noise");
    ADD_FAILURE() << "no error for an unknown gate noise";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "prune.noise: expected one of head, example, got 'token'");
  }
}

TEST(Gates, GradientsReachLogAlphaThroughSampleAndPenalty) {
  torch::manual_seed(1);
  auto g = gate_with({0.0f, 0.5f, -0.5f});
  g->penalty().backward();
  // d/dla sigmoid(la - c) = p (1 - p)
  const auto p = g->p_open().detach();
  EXPECT_TRUE(torch::allclose(g->log_alpha.grad(), p * (1 - p), 1e-6, 1e-7));
  g->log_alpha.mutable_grad().zero_();
  HardConcreteOptions o;
  o.noise = GateNoise::kExample;
  auto ge = gate_with({0.0f, 0.5f, -0.5f}, o);
  ge->sample(64).sum().backward();
  EXPECT_GT(ge->log_alpha.grad().abs().min().item<float>(), 0.0f);
}

TEST(LambdaSchedule, ConstantLinearPiecewise) {
  prune::LambdaSchedule c;
  c.value = 0.05;
  EXPECT_DOUBLE_EQ(c.at(0), 0.05);
  EXPECT_DOUBLE_EQ(c.at(100000), 0.05);
  prune::LambdaSchedule lin;
  lin.kind = LambdaScheduleKind::kLinear;
  lin.value = 0.2;
  lin.warmup_steps = 100;
  EXPECT_DOUBLE_EQ(lin.at(0), 0.0);
  EXPECT_DOUBLE_EQ(lin.at(25), 0.05);
  EXPECT_DOUBLE_EQ(lin.at(100), 0.2);
  EXPECT_DOUBLE_EQ(lin.at(500), 0.2);
  prune::LambdaSchedule pw;
  pw.kind = LambdaScheduleKind::kPiecewise;
  pw.steps = {10, 20, 40};
  pw.values = {0.01, 0.02, 0.1};
  pw.validate();
  EXPECT_DOUBLE_EQ(pw.at(0), 0.0);
  EXPECT_DOUBLE_EQ(pw.at(10), 0.01);
  EXPECT_DOUBLE_EQ(pw.at(39), 0.02);
  EXPECT_DOUBLE_EQ(pw.at(40), 0.1);
  pw.steps = {10, 5, 40};
  EXPECT_THROW(pw.validate(), Error);
  pw.steps = {10};
  EXPECT_THROW(pw.validate(), Error);
}

TEST(LambdaSchedule, TargetFractionRampsFromOne) {
  EXPECT_DOUBLE_EQ(prune::target_fraction(0, 0.25, 100), 1.0);
  EXPECT_DOUBLE_EQ(prune::target_fraction(50, 0.25, 100), 0.625);
  EXPECT_DOUBLE_EQ(prune::target_fraction(100, 0.25, 100), 0.25);
  EXPECT_DOUBLE_EQ(prune::target_fraction(1000, 0.25, 100), 0.25);
  EXPECT_DOUBLE_EQ(prune::target_fraction(3, 0.5, 0), 0.5);
}

}  // namespace
}  // namespace headcount
