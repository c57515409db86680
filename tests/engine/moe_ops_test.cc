// The mixture-of-experts ops on the CPU reference: dropless routing, ties,
// and finite-difference gradients of one MoE feed-forward with the routing
// held fixed (an element whose perturbation changes a token's choice is
// skipped — the choice is a step function with no gradient).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/moe_ops.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/moe.h"
#include "tests/engine/cpu_op_test_util.h"

namespace smallem {
namespace {

class MoeOpsTest : public testing::CpuOpTest {
 protected:
  struct Routed {
    std::vector<int32_t> experts, order, position, offsets;
    std::vector<float> gates, load;
  };
  Routed Route(const Tensor& logits, const Tensor& bias, int64_t k) {
    const int64_t n = logits.shape[0], e = logits.shape[1];
    Tensor experts = Zeros({n, k}, DType::kI32), gates = Zeros({n, k});
    Tensor order = Zeros({n * k}, DType::kI32), position = Zeros({n * k}, DType::kI32);
    Tensor offsets = Zeros({e + 1}, DType::kI32), load = Zeros({e});
    backend_.MoeRouteForward(MoeRouteParams{.logits = logits, .bias = bias, .experts = experts,
                                            .gates = gates, .order = order,
                                            .position = position, .offsets = offsets,
                                            .load = load, .top_k = k});
    auto ints = [](const Tensor& t) {
      return std::vector<int32_t>(t.i32(), t.i32() + t.numel());
    };
    return Routed{ints(experts), ints(order), ints(position), ints(offsets),
                  std::vector<float>(gates.f32(), gates.f32() + gates.numel()),
                  std::vector<float>(load.f32(), load.f32() + load.numel())};
  }
};

TEST_F(MoeOpsTest, DroplessRoutingProcessesEveryTokenExactlyOnce) {
  const int64_t n = 37, e = 5, k = 2;
  const Routed r = Route(Random({n, e}, -3, 3), Random({e}, -0.5f, 0.5f), k);
  // Σ assignments = tokens × k, and every slot sits at exactly one row.
  EXPECT_EQ(r.offsets.front(), 0);
  EXPECT_EQ(r.offsets.back(), n * k);
  EXPECT_EQ(std::accumulate(r.load.begin(), r.load.end(), 0.0f), float(n * k));
  std::vector<int> seen(n * k, 0);
  for (int64_t i = 0; i < n * k; ++i) {
    ++seen[r.order[i]];
    EXPECT_EQ(r.position[r.order[i]], i);
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  for (int64_t ex = 0; ex < e; ++ex) {
    for (int64_t i = r.offsets[ex]; i < r.offsets[ex + 1]; ++i) {
      EXPECT_EQ(r.experts[r.order[i]], ex) << "row " << i << " is not expert " << ex << "'s";
      if (i > r.offsets[ex]) EXPECT_LT(r.order[i - 1], r.order[i]) << "stable within an expert";
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    EXPECT_NE(r.experts[t * k], r.experts[t * k + 1]) << "token " << t << " chose one expert twice";
    EXPECT_NEAR(r.gates[t * k] + r.gates[t * k + 1], 1.0f, 1e-6f);
    EXPECT_GE(r.gates[t * k], 0.0f);
  }
}

TEST_F(MoeOpsTest, TiesGoToTheLowerExpertEveryTime) {
  const int64_t n = 4, e = 6, k = 3;
  Tensor logits = Zeros({n, e});  // every score equal
  const Routed a = Route(logits, Tensor{}, k);
  const Routed b = Route(logits, Tensor{}, k);
  EXPECT_EQ(a.experts, b.experts);
  for (int64_t t = 0; t < n; ++t) {
    EXPECT_EQ(a.experts[t * k], 0);
    EXPECT_EQ(a.experts[t * k + 1], 1);
    EXPECT_EQ(a.experts[t * k + 2], 2);
    EXPECT_FLOAT_EQ(a.gates[t * k], 1.0f / 3);
  }
  // A bias breaks the tie without changing the gates' logits.
  Tensor bias = Zeros({e});
  bias.f32()[5] = 1.0f;
  const Routed c = Route(logits, bias, k);
  EXPECT_EQ(c.experts[0], 5);
  EXPECT_EQ(c.experts[1], 0);
  EXPECT_FLOAT_EQ(c.gates[0], 1.0f / 3);
}

TEST_F(MoeOpsTest, BiasBalancingMovesTowardTheMeanLoad) {
  Tensor bias = Zeros({4}), load = Zeros({4}), last = Zeros({4});
  const float counts[] = {10, 2, 6, 6};  // mean 6
  std::copy(counts, counts + 4, load.f32());
  backend_.MoeBalance(MoeBalanceParams{.bias = bias, .load = load, .last_load = last,
                                       .rate = 0.01f});
  EXPECT_FLOAT_EQ(bias.f32()[0], -0.01f);  // overloaded: less likely chosen
  EXPECT_FLOAT_EQ(bias.f32()[1], 0.01f);
  EXPECT_FLOAT_EQ(bias.f32()[2], 0.0f);
  EXPECT_FLOAT_EQ(last.f32()[0], 10.0f);
  EXPECT_FLOAT_EQ(load.f32()[0], 0.0f);
}

// L = Σ w·MoeFeedForward(x) for one layer; every parameter and x checked.
class MoeGradientTest : public MoeOpsTest, public ::testing::WithParamInterface<bool> {};

TEST_P(MoeGradientTest, GradientMatchesFiniteDifferencesWithRoutingFixed) {
  const bool swiglu = GetParam();
  ModelConfig config{.vocab = 8, .context = 4, .layers = 1, .heads = 1, .embed = 6};
  config.architecture.feed_forward = swiglu ? FeedForwardKind::kSwiGlu : FeedForwardKind::kGelu;
  config.moe = MoeConfig{.experts = 4, .top_k = 2, .shared = 1, .expert_width = 5};
  const int64_t n = 9, c = 6, e = 4, w = 5, k = 2;
  struct Pair { Tensor value, grad; };
  std::vector<Pair> params;
  auto param = [&](Shape s) {
    params.push_back({Random(s, -0.8f, 0.8f), Zeros(s)});
    return params.back().value;
  };
  const Tensor x = param({n, c});
  MoeWeights wts{.router = param({e, c}), .bias = Random({e}, -0.3f, 0.3f),
                 .up = param({e, w, c}), .gate = swiglu ? param({e, w, c}) : Tensor{},
                 .proj = param({e, c, w}), .shared_up = param({w, c}),
                 .shared_gate = swiglu ? param({w, c}) : Tensor{},
                 .shared_proj = param({c, w}), .load = Zeros({e}), .last_load = Zeros({e})};
  const Tensor weights = Random({n, c});
  Arena arena(backend_, 1 << 22);
  auto run = [&](bool backward, std::vector<int32_t>* experts) {
    arena.Reset();
    Tape tape(backend_, arena);
    auto find = [&](const Tensor& t) {
      for (const Pair& p : params) {
        if (p.value.data == t.data) return tape.Param(p.value, p.grad);
      }
      return tape.Input(t);
    };
    const Var out = MoeFeedForward(tape, find, config, wts, find(x));
    const Tensor vo = tape.value(out);
    double loss = 0;
    for (int64_t i = 0; i < vo.numel(); ++i) loss += double{weights.f32()[i]} * vo.f32()[i];
    if (experts != nullptr) {
      // Recompute the choice on the host from x·W_rᵀ + bias.
      experts->clear();
      for (int64_t t = 0; t < n; ++t) {
        std::vector<std::pair<double, int>> s;
        for (int64_t ex = 0; ex < e; ++ex) {
          double z = wts.bias.f32()[ex];
          for (int64_t i = 0; i < c; ++i) z += double{x.f32()[t * c + i]} * wts.router.f32()[ex * c + i];
          s.push_back({-z, static_cast<int>(ex)});
        }
        std::sort(s.begin(), s.end());
        for (int64_t j = 0; j < k; ++j) experts->push_back(s[j].second);
      }
    }
    if (backward) {
      tape.Backward(Mean(tape, Mul(tape, out, tape.Input(weights))));
    }
    return loss;
  };
  run(true, nullptr);
  // The backward above differentiates mean(w ⊙ out) = L / numel.
  const double scale = static_cast<double>(n * c);
  std::vector<int32_t> base;
  run(false, &base);
  int checked = 0, skipped = 0;
  for (const Pair& p : params) {
    for (int64_t i = 0; i < p.value.numel(); ++i) {
      float& v = p.value.f32()[i];
      const float v0 = v;
      const float plus = v0 + 1e-2f, minus = v0 - 1e-2f;
      std::vector<int32_t> ep, em;
      v = plus;
      const double lp = run(false, &ep);
      v = minus;
      const double lm = run(false, &em);
      v = v0;
      if (ep != base || em != base) {
        ++skipped;
        continue;
      }
      const double numeric = (lp - lm) / (double{plus} - minus);
      const double analytic = p.grad.f32()[i] * scale;
      EXPECT_NEAR(analytic, numeric, 1e-2 * std::abs(numeric) + 2e-3) << "element " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10 * skipped) << "routing changed too often to test";
}

INSTANTIATE_TEST_SUITE_P(GeluAndSwiGlu, MoeGradientTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "SwiGlu" : "Gelu"; });

TEST_F(MoeOpsTest, AuxLossGradientMatchesFiniteDifferences) {
  // L_aux = α·E·Σ_e f_e·P_e with f held at the routed counts.
  const int64_t n = 7, e = 4, k = 2;
  const float alpha = 0.5f;
  Tensor logits = Random({n, e}, -2, 2);
  const Routed r = Route(logits, Tensor{}, k);
  Tensor experts = Zeros({n, k}, DType::kI32), gates = Zeros({n, k}), offsets = Zeros({e + 1}, DType::kI32);
  std::copy(r.experts.begin(), r.experts.end(), experts.i32());
  std::copy(r.gates.begin(), r.gates.end(), gates.f32());
  std::copy(r.offsets.begin(), r.offsets.end(), offsets.i32());
  Tensor grad_gates = Zeros({n, k}), grad = Zeros({n, e});
  backend_.MoeRouteBackward(MoeRouteBackwardParams{
      .logits = logits, .experts = experts, .gates = gates, .offsets = offsets,
      .grad_gates = grad_gates, .grad_logits = grad, .aux_coefficient = alpha});
  auto aux = [&] {
    double total = 0;
    for (int64_t ex = 0; ex < e; ++ex) {
      const double f = double(r.offsets[ex + 1] - r.offsets[ex]) / (n * k);
      double p = 0;
      for (int64_t t = 0; t < n; ++t) {
        double sum = 0;
        for (int64_t i = 0; i < e; ++i) sum += std::exp(double{logits.f32()[t * e + i]});
        p += std::exp(double{logits.f32()[t * e + ex]}) / sum / n;
      }
      total += alpha * e * f * p;
    }
    return total;
  };
  for (int64_t i = 0; i < n * e; ++i) {
    float& z = logits.f32()[i];
    const float z0 = z;
    z = z0 + 1e-2f;
    const double lp = aux();
    z = z0 - 1e-2f;
    const double lm = aux();
    z = z0;
    EXPECT_NEAR(grad.f32()[i], (lp - lm) / 2e-2, 1e-4) << "logit " << i;
  }
}

}  // namespace
}  // namespace smallem
