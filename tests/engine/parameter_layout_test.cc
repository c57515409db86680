// The parameter layout (runspec/parameter_layout.h) of every architecture
// option: its counts are the numbers ModelConfig gave before the layout
// existed, the allocated model's parameters add up to them, and the names
// are unique and those of older weights files.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "runspec/parameter_layout.h"
#include "tests/engine/architectures.h"

namespace smallem {
namespace {

// One config and the counts ModelConfig gave it before the layout.
struct Case {
  std::string name;
  ModelConfig config;
  int64_t parameters, total, active, mtp;
};

ModelConfig Tiny(Architecture arch) {
  return ModelConfig{.vocab = 11, .context = 6, .layers = 3, .heads = 2, .embed = 8,
                     .architecture = arch};
}

Architecture Latent(int64_t q_latent, bool bias) {
  Architecture a = Architecture::Modern();
  a.attention = AttentionKind::kLatent;
  a.kv_latent = 4;
  a.q_latent = q_latent;
  a.bias = bias;
  return a;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](std::string name, ModelConfig c) {
    cases.push_back(Case{.name = std::move(name), .config = c});
  };
  for (const Architecture& a : testing::AllArchitectures()) add(ArchitectureName(a), Tiny(a));
  add("latent", Tiny(Latent(0, false)));
  add("latent_q_latent", Tiny(Latent(4, false)));
  add("latent_bias_rope_dim", [] {
    ModelConfig c = Tiny(Latent(4, true));
    c.architecture.rope_dim = 2;
    c.architecture.kv_latent = 6;
    return c;
  }());
  for (bool bias : {true, false}) {
    ModelConfig c = Tiny(bias ? Architecture::Gpt2() : Architecture::Modern());
    c.architecture.own_keys = 1;
    add(bias ? "own_keys_bias" : "own_keys", c);
  }
  {
    ModelConfig c = Tiny(Architecture::Modern());
    c.architecture.passes = 2;
    add("passes", c);
  }
  for (bool swiglu : {true, false}) {
    ModelConfig c = Tiny(swiglu ? Architecture::Modern() : Architecture::Gpt2());
    c.moe = MoeConfig{.experts = 4, .top_k = 2, .shared = 1};
    add(swiglu ? "moe_shared_swiglu" : "moe_shared_gelu_bias", c);
  }
  {
    ModelConfig c = Tiny(Architecture::Modern());
    c.moe = MoeConfig{.experts = 3, .top_k = 1, .expert_width = 5, .every = 2,
                      .first_dense = true};
    add("moe_every_first_dense", c);
  }
  for (int64_t depths : {1, 2}) {
    ModelConfig c = Tiny(Architecture::Gpt2());
    c.mtp = depths;
    add(depths == 1 ? "mtp1" : "mtp2", c);
  }
  {
    ModelConfig c = Tiny(Architecture::Modern());
    c.mtp = 1;
    c.moe = MoeConfig{.experts = 4, .top_k = 2};
    c.architecture.own_keys = 2;
    add("mtp_moe_own_keys", c);
  }
  {
    ModelConfig c = Tiny(Latent(4, false));
    c.mtp = 2;
    add("mtp_latent", c);
  }
  // {ParameterCount, TotalParameterCount, ActiveParameterCount,
  //  MtpParameterCount} of the closed-form count the layout replaced.
  const std::vector<std::vector<int64_t>> before = {
      {2768, 2768, 2768, 0},  // layer_gelu_learned_bias
      {2552, 2552, 2552, 0},  // layer_gelu_learned_nobias
      {2720, 2720, 2720, 0},  // layer_gelu_rope_bias
      {2504, 2504, 2504, 0},  // layer_gelu_rope_nobias
      {3008, 3008, 3008, 0},  // layer_swiglu_learned_bias
      {2744, 2744, 2744, 0},  // layer_swiglu_learned_nobias
      {2960, 2960, 2960, 0},  // layer_swiglu_rope_bias
      {2696, 2696, 2696, 0},  // layer_swiglu_rope_nobias
      {2712, 2712, 2712, 0},  // rms_gelu_learned_bias
      {2496, 2496, 2496, 0},  // rms_gelu_learned_nobias
      {2664, 2664, 2664, 0},  // rms_gelu_rope_bias
      {2448, 2448, 2448, 0},  // rms_gelu_rope_nobias
      {2952, 2952, 2952, 0},  // rms_swiglu_learned_bias
      {2688, 2688, 2688, 0},  // rms_swiglu_learned_nobias
      {2904, 2904, 2904, 0},  // rms_swiglu_rope_bias
      {2640, 2640, 2640, 0},  // rms_swiglu_rope_nobias
      {2556, 2556, 2556, 0},  // latent
      {2568, 2568, 2568, 0},  // latent_q_latent
      {2886, 2886, 2886, 0},  // latent_bias_rope_dim
      {2480, 2480, 2480, 0},  // own_keys_bias
      {2384, 2384, 2384, 0},  // own_keys
      {2640, 2640, 2640, 0},  // passes
      {3900, 3888, 2736, 0},  // moe_shared_swiglu
      {3860, 3848, 2792, 0},  // moe_shared_gelu_bias
      {2451, 2448, 2208, 0},  // moe_every_first_dense
      {3816, 3816, 3816, 1048},  // mtp1
      {4864, 4864, 4864, 2096},  // mtp2
      {5348, 5336, 3608, 1000},  // mtp_moe_own_keys
      {4520, 4520, 4520, 1952},  // mtp_latent
  };
  CHECK_EQ(before.size(), cases.size()) << "one row of counts per case";
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].parameters = before[i][0];
    cases[i].total = before[i][1];
    cases[i].active = before[i][2];
    cases[i].mtp = before[i][3];
  }
  return cases;
}

TEST(ParameterLayoutTest, CountsAreThoseOfBefore) {
  for (const Case& c : Cases()) {
    ASSERT_TRUE(c.config.Validate().ok()) << c.name << ": " << c.config.Validate();
    const ParameterLayout layout(c.config);
    EXPECT_EQ(layout.ParameterCount(), c.parameters) << c.name;
    EXPECT_EQ(layout.TotalParameterCount(), c.total) << c.name;
    EXPECT_EQ(layout.ActiveParameterCount(), c.active) << c.name;
    EXPECT_EQ(layout.MtpParameterCount(), c.mtp) << c.name;
    EXPECT_EQ(c.config.ParameterCount(), c.parameters) << c.name;
    EXPECT_EQ(c.config.TotalParameterCount(), c.total) << c.name;
    EXPECT_EQ(c.config.ActiveParameterCount(), c.active) << c.name;
    EXPECT_EQ(c.config.MtpParameterCount(), c.mtp) << c.name;
  }
}

// The counts again, from the allocated model's own parameters (names and
// tensors, not the layout's flags): the buffer, its trained part (all but
// the routers' selection biases) and a token's part (top_k of E experts).
TEST(ParameterLayoutTest, AllocatedModelHasTheLayoutsCounts) {
  for (const Case& c : Cases()) {
    CpuBackend be(1);
    auto model = Model::Create(c.config, be);
    ASSERT_TRUE(model.ok()) << c.name << ": " << model.status();
    const ParameterLayout layout(c.config);
    EXPECT_EQ((*model)->ParameterCount(), layout.ParameterCount()) << c.name;
    int64_t buffer = 0, trained = 0, active = 0, mtp = 0;
    std::set<std::string> names;
    ASSERT_EQ((*model)->parameters().size(), layout.slots().size()) << c.name;
    for (size_t i = 0; i < layout.slots().size(); ++i) {
      const Model::Parameter& p = (*model)->parameters()[i];
      EXPECT_EQ(p.name, layout.slots()[i].name) << c.name;
      EXPECT_TRUE(names.insert(p.name).second) << c.name << ": " << p.name << " twice";
      // Contiguous, in layout order.
      EXPECT_EQ(p.value.f32(), (*model)->values().f32() + buffer) << c.name << ": " << p.name;
      const int64_t n = p.value.numel();
      buffer += n;
      if (p.name.ends_with(".ff.router.bias")) continue;
      trained += n;
      active += p.name.find(".ff.experts.") != std::string::npos
                    ? n / c.config.moe.experts * c.config.moe.top_k
                    : n;
      if (p.name.starts_with("mtp.")) mtp += n;
    }
    EXPECT_EQ(buffer, c.parameters) << c.name;
    EXPECT_EQ(trained, c.total) << c.name;
    EXPECT_EQ(active, c.active) << c.name;
    EXPECT_EQ(mtp, c.mtp) << c.name;
  }
}

std::vector<std::string> Names(const ModelConfig& c) {
  const ParameterLayout layout(c);
  std::vector<std::string> names;
  for (const ParameterSlot& s : layout.slots()) names.push_back(s.name);
  return names;
}

// The names and order of the weights files written before the layout.
TEST(ParameterLayoutTest, NamesAreThoseOfOlderWeightsFiles) {
  ModelConfig gpt2 = Tiny(Architecture::Gpt2());
  gpt2.layers = 1;
  EXPECT_EQ(Names(gpt2),
            (std::vector<std::string>{
                "embed.weight", "positions.weight", "blocks.0.ln1.gain", "blocks.0.ln1.bias",
                "blocks.0.attn.query.weight", "blocks.0.attn.key.weight",
                "blocks.0.attn.value.weight", "blocks.0.attn.query.bias",
                "blocks.0.attn.key.bias", "blocks.0.attn.value.bias",
                "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias", "blocks.0.ln2.gain",
                "blocks.0.ln2.bias", "blocks.0.ff.up.weight", "blocks.0.ff.up.bias",
                "blocks.0.ff.proj.weight", "blocks.0.ff.proj.bias", "final_norm.gain",
                "final_norm.bias"}));

  ModelConfig latent = Tiny(Latent(4, false));
  latent.layers = 1;
  latent.mtp = 1;
  EXPECT_EQ(Names(latent),
            (std::vector<std::string>{
                "embed.weight", "blocks.0.ln1.gain", "blocks.0.attn.query_down.weight",
                "blocks.0.attn.query_norm.gain", "blocks.0.attn.query_up.weight",
                "blocks.0.attn.kv_down.weight", "blocks.0.attn.kv_norm.gain",
                "blocks.0.attn.kv_up.weight", "blocks.0.attn.key_rope.weight",
                "blocks.0.attn.proj.weight", "blocks.0.ln2.gain", "blocks.0.ff.up.weight",
                "blocks.0.ff.gate.weight", "blocks.0.ff.proj.weight", "mtp.1.block.ln1.gain",
                "mtp.1.block.attn.query_down.weight", "mtp.1.block.attn.query_norm.gain",
                "mtp.1.block.attn.query_up.weight", "mtp.1.block.attn.kv_down.weight",
                "mtp.1.block.attn.kv_norm.gain", "mtp.1.block.attn.kv_up.weight",
                "mtp.1.block.attn.key_rope.weight", "mtp.1.block.attn.proj.weight",
                "mtp.1.block.ln2.gain", "mtp.1.block.ff.up.weight", "mtp.1.block.ff.gate.weight",
                "mtp.1.block.ff.proj.weight", "final_norm.gain", "mtp.1.hidden_norm.gain",
                "mtp.1.embed_norm.gain", "mtp.1.merge.hidden.weight", "mtp.1.merge.embed.weight",
                "mtp.1.final_norm.gain"}));

  ModelConfig moe = Tiny(Architecture::Modern());
  moe.layers = 2;
  moe.architecture.own_keys = 1;
  moe.moe = MoeConfig{.experts = 4, .top_k = 2, .shared = 1, .first_dense = true};
  const std::vector<std::string> names = Names(moe);
  const std::vector<std::string> second(names.begin() + 10, names.end());
  EXPECT_EQ(second, (std::vector<std::string>{
                        "blocks.1.ln1.gain", "blocks.1.attn.query.weight",
                        "blocks.1.attn.proj.weight", "blocks.1.ln2.gain",
                        "blocks.1.ff.router.weight", "blocks.1.ff.router.bias",
                        "blocks.1.ff.experts.up.weight", "blocks.1.ff.experts.gate.weight",
                        "blocks.1.ff.experts.proj.weight", "blocks.1.ff.shared.up.weight",
                        "blocks.1.ff.shared.gate.weight", "blocks.1.ff.shared.proj.weight",
                        "final_norm.gain"}));
}

// Muon's matrices are the blocks' and the MTP depths' 2-D ones.
TEST(ParameterLayoutTest, HiddenMatricesAreTheBlocksTwoDimensionalWeights) {
  ModelConfig c = Tiny(Architecture::Modern());
  c.mtp = 1;
  c.moe = MoeConfig{.experts = 4, .top_k = 2, .shared = 1};
  const ParameterLayout layout(c);
  std::set<std::string> muon;
  for (const ParameterSlot& s : layout.slots()) {
    if (s.hidden_matrix) muon.insert(s.name);
  }
  for (const char* name : {"blocks.0.attn.query.weight", "blocks.1.ff.router.weight",
                           "blocks.2.ff.shared.up.weight", "mtp.1.block.ff.up.weight",
                           "mtp.1.merge.hidden.weight"}) {
    EXPECT_TRUE(muon.contains(name)) << name;
  }
  for (const char* name : {"embed.weight", "blocks.0.ln1.gain", "blocks.0.ff.router.bias",
                           "blocks.0.ff.experts.up.weight", "final_norm.gain"}) {
    EXPECT_FALSE(muon.contains(name)) << name;
  }
  const BlockSlots& b = layout.blocks()[0];
  EXPECT_EQ(layout.slot(b.moe.router_bias).trained, false);
  EXPECT_EQ(layout.slot(b.moe.experts_up).active,
            layout.slot(b.moe.experts_up).numel / 4 * 2);
  EXPECT_EQ(b.key, b.query + 1);
  EXPECT_EQ(b.value, b.query + 2);
}

}  // namespace
}  // namespace smallem
