// Multi-token prediction (engine/model/mtp.h): its config and parameters,
// gradients through the depths against finite differences, causality, the
// objective's arithmetic, and that a weights file keeps the depths.
#include "engine/model/mtp.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "engine/optim/muon.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/run_spec.h"
#include "tests/engine/architectures.h"
#include "tests/engine/model_test_util.h"
#include "tests/engine/test_cpu_backend.h"
#include "tests/temp_dir.h"

namespace smallem {
namespace {

using testing::Randomize;
using testing::TinyConfig;
using testing::ToHost;
using testing::Tokens;

ModelConfig TinyMtpConfig(Architecture arch, int64_t depths = 2, double weight = 0.5) {
  ModelConfig c = TinyConfig(arch);
  c.mtp = depths;
  c.mtp_weight = weight;
  return c;
}

// The batch of the tests below: B = 2 sequences of T = 5, from 2 × 6 tokens.
constexpr int64_t kB = 2, kT = 5;
const std::vector<int32_t> kInputs = {1, 4, 2, 9, 3, 0, 5, 5, 10, 7};
const std::vector<int32_t> kTargets = {4, 2, 9, 3, 8, 5, 5, 10, 7, 6};

// Every per-row loss of AllLosses on the host: next-token first, then the
// depths; and the training objective's two scalars.
struct HostLosses {
  std::vector<std::vector<float>> rows;
  float total = 0, next_token = 0;
};

HostLosses Score(const Model& model, const std::vector<int32_t>& in,
                    const std::vector<int32_t>& tg, int64_t batch, int64_t time) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  const Tensor ti = Tokens(arena, be, in), tt = Tokens(arena, be, tg);
  HostLosses out;
  const Model::DepthLosses all = model.AllLosses(tape, ti, tt, batch, time);
  out.rows.push_back(ToHost(be, tape.value(all.next_token)));
  for (Var d : all.depths) out.rows.push_back(ToHost(be, tape.value(d)));
  const Model::TrainingLoss loss = model.TrainingObjective(tape, ti, tt, batch, time);
  be.CopyToHost(&out.total, tape.value(loss.total).data, sizeof(float));
  be.CopyToHost(&out.next_token, tape.value(loss.next_token).data, sizeof(float));
  return out;
}

TEST(MtpConfigTest, ParametersAreTheDepthsModulesAndTheJsonKeepsThem) {
  const ModelConfig c = TinyMtpConfig(Architecture::Gpt2());
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(c, be);
  ASSERT_TRUE(model.ok()) << model.status();
  int64_t mtp = 0;
  for (const Model::Parameter& p : (*model)->parameters()) {
    if (p.name.starts_with("mtp.")) mtp += p.value.numel();
  }
  EXPECT_GT(mtp, 0);
  EXPECT_EQ(c.MtpParameterCount(), mtp);
  ModelConfig plain = c;
  plain.mtp = 0;
  EXPECT_EQ(plain.MtpParameterCount(), 0);
  EXPECT_EQ(c.ParameterCount(), plain.ParameterCount() + mtp);
  for (const char* name : {"mtp.1.hidden_norm.gain", "mtp.1.embed_norm.bias",
                           "mtp.1.merge.hidden.weight", "mtp.2.merge.embed.weight",
                           "mtp.2.block.attn.query.weight", "mtp.2.block.ff.proj.bias",
                           "mtp.2.final_norm.gain"}) {
    EXPECT_NE((*model)->Find(name), nullptr) << name;
  }
  EXPECT_EQ((*model)->Find("mtp.3.final_norm.gain"), nullptr);
  EXPECT_EQ(BlockPrefixes(c).back(), "mtp.2.block");

  const nlohmann::json j = c.ToJson();
  EXPECT_EQ(j["mtp"], 2);
  auto back = ModelConfig::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->mtp, 2);
  EXPECT_EQ(back->mtp_weight, 0.5);
  // Without MTP the JSON is what it always was, and reads back as 0.
  EXPECT_FALSE(plain.ToJson().contains("mtp"));
  EXPECT_FALSE(plain.ToJson().contains("mtp_weight"));
  EXPECT_EQ(ModelConfig::FromJson(plain.ToJson())->mtp, 0);
}

TEST(MtpConfigTest, ImpossibleValuesAreErrorsNamingTheKey) {
  ModelConfig c = TinyMtpConfig(Architecture::Gpt2());
  c.mtp = -1;
  EXPECT_NE(c.Validate().message().find("mtp -1"), std::string::npos) << c.Validate();
  c.mtp = c.context;
  EXPECT_NE(c.Validate().message().find("below context"), std::string::npos) << c.Validate();
  c.mtp = 1;
  c.mtp_weight = -0.5;
  EXPECT_NE(c.Validate().message().find("mtp_weight"), std::string::npos) << c.Validate();
  nlohmann::json j = TinyMtpConfig(Architecture::Gpt2()).ToJson();
  j["mtp"] = "two";
  EXPECT_NE(ModelConfig::FromJson(j).status().message().find("\"mtp\""), std::string::npos);

  const nlohmann::json spec = {{"data", "d"}, {"steps", 10}, {"context", 16}};
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json s = spec;
    s[key] = value;
    return RunSpec::FromJson(s).status();
  };
  EXPECT_NE(with("mtp", -2).message().find("\"mtp\""), std::string::npos) << with("mtp", -2);
  EXPECT_NE(with("mtp", 16).message().find("\"mtp\""), std::string::npos) << with("mtp", 16);
  EXPECT_NE(with("mtp", 1.5).message().find("\"mtp\""), std::string::npos);
  EXPECT_NE(with("mtp_weight", -1).message().find("\"mtp_weight\""), std::string::npos);
  EXPECT_NE(with("mtp_weight", "high").message().find("\"mtp_weight\""), std::string::npos);
  // The canonical spec names mtp only when it is on.
  auto on = RunSpec::FromJson({{"data", "d"}, {"steps", 10}, {"mtp", 2}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->ToJson()["mtp"], 2);
  EXPECT_EQ(on->ToJson()["mtp_weight"], 0.3);
  EXPECT_EQ(on->ModelFor(300).mtp, 2);
  auto off = RunSpec::FromJson({{"data", "d"}, {"steps", 10}, {"mtp_weight", 0.7}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->ToJson().contains("mtp_weight"));
}

TEST(MtpConfigTest, MuonUpdatesTheDepthsMatrices) {
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(TinyMtpConfig(Architecture::Modern()), be);
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(IsMuonParameter(*(*model)->Find("mtp.1.merge.hidden.weight")));
  EXPECT_TRUE(IsMuonParameter(*(*model)->Find("mtp.2.block.ff.up.weight")));
  EXPECT_FALSE(IsMuonParameter(*(*model)->Find("mtp.1.final_norm.gain")));
}

class MtpArchTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(MtpArchTest, GradientThroughTheDepthsMatchesFiniteDifferences) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(TinyMtpConfig(GetParam()), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 7);
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  (*model)->ZeroGrad();
  const Model::TrainingLoss loss = (*model)->TrainingObjective(
      tape, Tokens(arena, be, kInputs), Tokens(arena, be, kTargets), kB, kT);
  tape.Backward(loss.total);
  const std::vector<float> grad = ToHost(be, (*model)->grads());
  std::vector<float> values = ToHost(be, (*model)->values());

  // A few entries of every parameter tensor (the embedding is read by the
  // main model, every depth's input and the shared head), by central
  // differences of the whole objective.
  Rng rng(3);
  int checked = 0, mtp_nonzero = 0;
  for (const Model::Parameter& p : (*model)->parameters()) {
    for (int probe = 0; probe < 3; ++probe) {
      int64_t local = static_cast<int64_t>(rng.Below(p.value.numel()));
      if (p.name == "positions.weight") local %= kT * p.value.shape[1];
      const int64_t i = (p.value.f32() - (*model)->values().f32()) + local;
      const float saved = values[i];
      const float eps = 1e-2f;
      values[i] = saved + eps;
      testing::FromHost(be, (*model)->values(), values);
      const double up = Score(**model, kInputs, kTargets, kB, kT).total;
      values[i] = saved - eps;
      testing::FromHost(be, (*model)->values(), values);
      const double down = Score(**model, kInputs, kTargets, kB, kT).total;
      values[i] = saved;
      testing::FromHost(be, (*model)->values(), values);
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(grad[i], numeric, 2e-3 + 3e-2 * std::abs(numeric))
          << p.name << "[" << local << "]";
      if (p.name.starts_with("mtp.") && std::abs(numeric) > 1e-4) ++mtp_nonzero;
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
  EXPECT_GT(mtp_nonzero, 10) << "the depths must reach the objective";
}

TEST_P(MtpArchTest, NoRowSeesItsFuture) {
  // Row t of every loss (next-token and each depth) may read inputs 0..t and
  // its target, token t+1; the main logits at t only inputs 0..t.
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(TinyMtpConfig(GetParam(), 3), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 11);
  const int64_t T = 6, V = 11;
  const std::vector<int32_t> text = {3, 1, 4, 1, 5, 9, 2};  // T + 1 tokens
  auto split = [&](const std::vector<int32_t>& s) {
    return std::pair{std::vector<int32_t>(s.begin(), s.end() - 1),
                     std::vector<int32_t>(s.begin() + 1, s.end())};
  };
  auto logits = [&](const std::vector<int32_t>& ids) {
    Arena arena(be, 1 << 20);
    Tape tape(be, arena);
    tape.set_grad_enabled(false);
    return ToHost(be, tape.value((*model)->Logits(tape, Tokens(arena, be, ids), 1, T)));
  };
  const auto [in_a, tg_a] = split(text);
  const HostLosses a = Score(**model, in_a, tg_a, 1, T);
  const std::vector<float> la = logits(in_a);
  for (int64_t k = 1; k <= T; ++k) {
    std::vector<int32_t> changed = text;
    changed[k] = (changed[k] + 5) % V;
    const auto [in_b, tg_b] = split(changed);
    const HostLosses b = Score(**model, in_b, tg_b, 1, T);
    for (size_t l = 0; l < a.rows.size(); ++l) {
      bool later_changed = false;
      for (int64_t t = 0; t < T; ++t) {
        if (t < k - 1) {
          ASSERT_EQ(a.rows[l][t], b.rows[l][t])
              << "loss " << l << " row " << t << " saw token " << k;
        } else {
          later_changed |= a.rows[l][t] != b.rows[l][t];
        }
      }
      EXPECT_TRUE(later_changed) << "loss " << l << ", token " << k;
    }
    const std::vector<float> lb = logits(in_b);
    for (int64_t i = 0; i < std::min(k, T) * V; ++i) {
      ASSERT_EQ(la[i], lb[i]) << "main logits at " << i / V << " saw token " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOption, MtpArchTest,
                         ::testing::ValuesIn(testing::AllArchitectures()), testing::ArchName);

TEST(MtpModelTest, ObjectiveIsTheNextTokenMeanPlusTheWeightedDepthMeans) {
  CpuBackend be(TestCpuOptions(2));
  const double weight = 0.5;
  auto model = Model::Create(TinyMtpConfig(Architecture::Modern(), 2, weight), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 5);
  const HostLosses l = Score(**model, kInputs, kTargets, kB, kT);
  ASSERT_EQ(l.rows.size(), 3u);
  double next = 0;
  for (float v : l.rows[0]) next += v;
  next /= kB * kT;
  double depths = 0;
  for (int64_t d = 1; d <= 2; ++d) {
    double sum = 0;
    // Depth d is scored on rows t ≥ d of each sequence only.
    for (int64_t r = 0; r < kB; ++r) {
      for (int64_t t = d; t < kT; ++t) sum += l.rows[d][r * kT + t];
    }
    depths += sum / (kB * (kT - d));
  }
  EXPECT_NEAR(l.next_token, next, 1e-5);
  EXPECT_NEAR(l.total, next + weight * depths / 2, 1e-5);
  EXPECT_GT(l.total - l.next_token, 0.1);

  // The unscored rows (t < d) take no part: any loss there leaves it.
  std::vector<int32_t> tg = kTargets;
  tg[0] = 0;  // row 0 of sequence 0: scored by next-token only
  const HostLosses m = Score(**model, kInputs, tg, kB, kT);
  EXPECT_NE(m.next_token, l.next_token);
  EXPECT_NEAR(m.total - m.next_token, l.total - l.next_token, 1e-6);
}

TEST(MtpModelTest, WithoutMtpTheObjectiveIsTheMeanLoss) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(TinyConfig(Architecture::Gpt2()), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 5);
  const HostLosses l = Score(**model, kInputs, kTargets, kB, kT);
  EXPECT_EQ(l.rows.size(), 1u);
  EXPECT_EQ(l.total, l.next_token);
  EXPECT_EQ(l.total, testing::MeanLoss(**model, kInputs, kTargets, kB, kT));
}

TEST(MtpModelTest, SavedAndLoadedModelGivesIdenticalLosses) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(TinyMtpConfig(Architecture::Gpt2(), 2, 0.25), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 9);
  const testing::TempDir dir;
  const std::string path = dir.Join("mtp.safetensors");
  ASSERT_TRUE(SaveWeights(**model, path).ok());
  auto loaded = LoadWeights(path, be);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().mtp, 2);
  EXPECT_EQ((*loaded)->config().mtp_weight, 0.25);
  const HostLosses a = Score(**model, kInputs, kTargets, kB, kT);
  const HostLosses b = Score(**loaded, kInputs, kTargets, kB, kT);
  EXPECT_EQ(a.total, b.total);
  EXPECT_EQ(a.rows, b.rows);
}

}  // namespace
}  // namespace smallem
