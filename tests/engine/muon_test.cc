// Muon: which parameters it takes, stacking that changes no number, each
// variant against a hand-computed small case, and a tiny model that trains
// with every variant.
#include "engine/optim/muon.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

constexpr float kLr = 0.1f;

class MuonTest : public ::testing::Test {
 protected:
  // One thread: batched products then compute each item exactly as alone.
  MuonTest() : be_(TestCpuOptions(1)), tensors_(be_) {}

  // A (rows, cols) matrix with value `value` and a zero gradient.
  MuonMatrix Matrix(const std::string& name, int64_t rows, int64_t cols,
                    const std::vector<float>& value = {}) {
    MuonMatrix m{.name = name, .value = Alloc({rows, cols}), .grad = Alloc({rows, cols})};
    if (!value.empty()) {
      CHECK_EQ(static_cast<int64_t>(value.size()), rows * cols);
      std::copy(value.begin(), value.end(), m.value.f32());
    }
    return m;
  }

  Tensor Alloc(Shape shape) { return tensors_.Allocate(shape); }

  std::unique_ptr<Muon> Create(std::vector<MuonMatrix> matrices, const std::string& spec,
                               float weight_decay = 0) {
    absl::StatusOr<OptimizerSpec> parsed = ParseOptimizerSpec(spec);
    CHECK(parsed.ok());
    absl::StatusOr<std::unique_ptr<Muon>> muon = Muon::Create(
        be_, std::move(matrices), MuonOptions{.spec = *parsed, .weight_decay = weight_decay});
    CHECK(muon.ok()) << muon.status().ToString();
    return std::move(*muon);
  }

  static void Set(const Tensor& t, const std::vector<float>& v) {
    CHECK_EQ(static_cast<int64_t>(v.size()), t.numel());
    std::copy(v.begin(), v.end(), t.f32());
  }
  static std::vector<float> Get(const Tensor& t) {
    return std::vector<float>(t.f32(), t.f32() + t.numel());
  }

  CpuBackend be_;
  testing::BackendTensors tensors_;
};

// The muon:short image of the singular values (3, 1) of G = [[3,0,0],[0,1,0]]
// after Frobenius normalization.
std::pair<double, double> ShortImage() {
  const double n = std::sqrt(10.0);
  return {ApplySchedule(ShortNewtonSchulzSchedule(), 3 / n),
          ApplySchedule(ShortNewtonSchulzSchedule(), 1 / n)};
}

const std::vector<float> kDiagonalGrad = {3, 0, 0, 0, 1, 0};
const float kScale23 = 0.18f * std::sqrt(3.0f);  // rms scale of a 2 × 3 matrix

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST_F(MuonTest, SameShapesShareAStackUnlessStackingIsOff) {
  std::vector<MuonMatrix> m = {Matrix("a", 4, 6), Matrix("b", 5, 3), Matrix("c", 4, 6),
                               Matrix("d", 6, 4)};
  EXPECT_EQ(Create(m, "muon")->Stacks(),
            (std::vector<std::vector<std::string>>{{"a", "c"}, {"b"}, {"d"}}));
  EXPECT_EQ(Create(m, "muon,stack=off")->Stacks(),
            (std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"c"}, {"d"}}));
}

TEST_F(MuonTest, RejectsNonMatrices) {
  MuonMatrix v{.name = "bias", .value = Alloc({5}), .grad = Alloc({5})};
  absl::StatusOr<std::unique_ptr<Muon>> muon = Muon::Create(be_, {v}, MuonOptions{});
  ASSERT_FALSE(muon.ok());
  EXPECT_EQ(muon.status().message(),
            "muon: bias must be a non-empty 2-D matrix with a gradient of its shape (got (5))");
}

TEST_F(MuonTest, RejectsOptionsTheParserWouldRefuse) {
  MuonOptions options;
  options.spec.period = 0;
  absl::StatusOr<std::unique_ptr<Muon>> muon = Muon::Create(be_, {Matrix("w", 2, 2)}, options);
  ASSERT_FALSE(muon.ok());
  EXPECT_EQ(muon.status().message(),
            "muon: period must be ≥ 1, boost ≥ 1 and power iterations ≥ 1 (got period=0, "
            "boost=1, 10 power iterations)");
}

TEST_F(MuonTest, ThreeMatricesTwoOfOneShapeGetExactlyTheUpdatesTheyGetAlone) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{24, 40}, {30, 16}, {24, 40}};
  for (const char* spec : {"muon", "muon:short", "muon:short,period=2,norm,boost=1.5"}) {
    std::vector<MuonMatrix> stacked, alone;
    for (size_t i = 0; i < shapes.size(); ++i) {
      auto [rows, cols] = shapes[i];
      std::vector<float> init(rows * cols);
      for (float& x : init) x = 0.1f * normal(rng);
      stacked.push_back(Matrix("m" + std::to_string(i), rows, cols, init));
      alone.push_back(Matrix("m" + std::to_string(i), rows, cols, init));
    }
    std::unique_ptr<Muon> together = Create(stacked, spec, 0.1f);
    ASSERT_EQ(together->Stacks().size(), 2u);
    std::vector<std::unique_ptr<Muon>> separate;
    for (const MuonMatrix& m : alone) separate.push_back(Create({m}, spec, 0.1f));
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < shapes.size(); ++i) {
        std::vector<float> g(stacked[i].grad.numel());
        for (float& x : g) x = normal(rng) * (i + 1);
        Set(stacked[i].grad, g);
        Set(alone[i].grad, g);
      }
      together->Step(kLr);
      for (auto& m : separate) m->Step(kLr);
      for (size_t i = 0; i < shapes.size(); ++i) {
        const std::vector<float> a = Get(stacked[i].value), b = Get(alone[i].value);
        for (size_t k = 0; k < a.size(); ++k) {
          ASSERT_EQ(a[k], b[k]) << spec << " step " << step << " matrix " << i << " element " << k;
        }
      }
    }
  }
}

TEST_F(MuonTest, OneStepIsTheScaledOrthogonalizedMomentum) {
  MuonMatrix w = Matrix("w", 2, 3);
  Set(w.grad, kDiagonalGrad);
  Create({w}, "muon:short")->Step(kLr);
  // U = 1.95·G keeps G's singular vectors; O = diag(f(3/√10), f(1/√10)).
  const auto [f1, f2] = ShortImage();
  ExpectNear(Get(w.value), {-kLr * kScale23 * f1, 0, 0, 0, -kLr * kScale23 * f2, 0}, 1e-6);
}

TEST_F(MuonTest, WeightDecayIsDecoupled) {
  MuonMatrix w = Matrix("w", 3, 2, {1, -2, 3, -4, 5, -6});
  Create({w}, "muon", 0.5f)->Step(kLr);  // zero gradient: only the decay acts
  const double keep = 1 - kLr * 0.5;
  ExpectNear(Get(w.value), {keep, -2 * keep, 3 * keep, -4 * keep, 5 * keep, -6 * keep}, 1e-6);
}

TEST_F(MuonTest, PeriodNormalizesRowsBetweenOrthogonalSteps) {
  MuonMatrix w = Matrix("w", 2, 3);
  Set(w.grad, {3, 4, 0, 1, 0, 0});
  std::unique_ptr<Muon> muon = Create({w}, "muon:short,period=2");
  muon->Step(kLr);  // orthogonalized
  const std::vector<float> w1 = Get(w.value);
  muon->Step(kLr);  // rows of U ∝ G to norm 1, times 0.15
  const std::vector<float> w2 = Get(w.value);
  const std::vector<double> rows = {0.6, 0.8, 0, 1, 0, 0};
  std::vector<float> delta2(6), delta3(6);
  for (int i = 0; i < 6; ++i) delta2[i] = w2[i] - w1[i];
  std::vector<double> want(6);
  for (int i = 0; i < 6; ++i) want[i] = -kLr * kScale23 * 0.15 * rows[i];
  ExpectNear(delta2, want, 1e-6);
  muon->Step(kLr);  // orthogonalized again: U is still ∝ G, so the first step again
  const std::vector<float> w3 = Get(w.value);
  std::vector<double> delta1(w1.begin(), w1.end());
  for (int i = 0; i < 6; ++i) delta3[i] = w3[i] - w2[i];
  ExpectNear(delta3, delta1, 1e-6);
}

TEST_F(MuonTest, NormEqualizesNeuronsAndKeepsTheFrobeniusNorm) {
  MuonMatrix w = Matrix("w", 2, 3);
  Set(w.grad, kDiagonalGrad);
  Create({w}, "muon:short,norm")->Step(kLr);
  // Rows (neurons) of O = diag(f1, f2) are divided by their RMS, so both
  // reach one size, s, with s² + s² = f1² + f2².
  const auto [f1, f2] = ShortImage();
  const double s = std::sqrt((f1 * f1 + f2 * f2) / 2);
  ExpectNear(Get(w.value), {-kLr * kScale23 * s, 0, 0, 0, -kLr * kScale23 * s, 0}, 1e-6);
}

TEST_F(MuonTest, BoostScalesEveryDirectionButTheTopOne) {
  MuonMatrix w = Matrix("w", 2, 3);
  Set(w.grad, kDiagonalGrad);
  Create({w}, "muon:short,boost=2")->Step(kLr);
  // u₁ = e₁, v₁ = e₁: O' = 2·O − e₁e₁ᵀ.
  const auto [f1, f2] = ShortImage();
  ExpectNear(Get(w.value), {-kLr * kScale23 * (2 * f1 - 1), 0, 0, 0, -kLr * kScale23 * 2 * f2, 0},
             1e-6);
}

TEST_F(MuonTest, BoostFindsTheTopDirectionOfATallMatrix) {
  // G = 3·a·bᵀ + 1·c·dᵀ with orthonormal a ⟂ c (4-vectors) and b ⟂ d
  // (2-vectors): the top direction is a·bᵀ whatever the orientation.
  const double h = 1 / std::sqrt(2.0);
  const double a[4] = {0.5, 0.5, 0.5, 0.5}, c[4] = {0.5, -0.5, 0.5, -0.5};
  const double b[2] = {h, h}, d[2] = {h, -h};
  std::vector<float> g(8);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) g[i * 2 + j] = static_cast<float>(3 * a[i] * b[j] + c[i] * d[j]);
  }
  MuonMatrix w = Matrix("w", 4, 2);
  Set(w.grad, g);
  Create({w}, "muon:short,boost=3")->Step(kLr);
  const auto [f1, f2] = ShortImage();
  std::vector<double> want(8);
  const double scale = -kLr * 0.18 * std::sqrt(4.0);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      want[i * 2 + j] = scale * ((3 * f1 - 2) * a[i] * b[j] + 3 * f2 * c[i] * d[j]);
    }
  }
  ExpectNear(Get(w.value), want, 1e-6);
}

TEST(MuonParameterTest, HiddenMatricesGoToMuonTheRestToAdamW) {
  CpuBackend be(TestCpuOptions(1));
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(
      ModelConfig{.vocab = 11, .context = 6, .layers = 2, .heads = 2, .embed = 8,
                  .architecture = Architecture::Gpt2()},
      be);
  ASSERT_TRUE(model.ok());
  int matrices = 0;
  for (const Model::Parameter& p : (*model)->parameters()) {
    const bool muon = IsMuonParameter(p);
    matrices += muon;
    if (p.name.starts_with("embed") || p.name.starts_with("positions") ||
        p.name.ends_with(".bias") || p.name.ends_with(".gain")) {
      EXPECT_FALSE(muon) << p.name;
    } else {
      EXPECT_TRUE(muon) << p.name;
    }
  }
  EXPECT_EQ(matrices, 2 * 6);  // query, key, value, proj, up, ff.proj per block
  absl::StatusOr<std::unique_ptr<MuonOptimizer>> opt =
      MuonOptimizer::Create(**model, MuonOptions{}, AdamWOptions{}, 0.02f, 3e-3f);
  ASSERT_TRUE(opt.ok());
  // (8, 8) ×8, (32, 8) ×2, (8, 32) ×2.
  EXPECT_EQ((*opt)->muon().Stacks().size(), 3u);
}

RunSpec TinySpec(const std::string& optimizer) {
  RunSpec s = testing::TinyRunSpec(/*steps=*/60);
  s.optimizer = optimizer;
  return s;
}

TEST(MuonTrainingTest, TinyModelLearnsWithEveryVariant) {
  CpuBackend be(TestCpuOptions(2));
  for (const char* optimizer :
       {"muon", "muon:short", "muon:short,period=3", "muon:short,norm", "muon:short,boost=1.5",
        "muon,stack=off", "muon:short,period=2,norm,boost=1.5,stack=off"}) {
    absl::StatusOr<nlohmann::json> result = Train(TinySpec(optimizer), be, TrainOptions{});
    ASSERT_TRUE(result.ok()) << optimizer << ": " << result.status();
    // A uniform guess over 300 tokens costs ln 300 ≈ 5.7 nats per token;
    // AdamW reaches below 0.75 of it in these 60 steps (trainer_test.cc).
    EXPECT_LT((*result)["val_nats_per_token"].get<double>(), 0.75 * std::log(300.0)) << optimizer;
    EXPECT_LT((*result)["final_train_loss"].get<double>(), 0.75 * std::log(300.0)) << optimizer;
  }
}

}  // namespace
}  // namespace smallem
