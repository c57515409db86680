// Optimizer spec strings: every documented form parses, options combine in
// any order, and each mistake gets a message that names it and the choices.
#include "runspec/optimizer_spec.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/run_spec.h"

namespace smallem {
namespace {

using Kind = OptimizerSpec::Kind;
using Schedule = OptimizerSpec::Schedule;

OptimizerSpec Parsed(const std::string& text) {
  absl::StatusOr<OptimizerSpec> spec = ParseOptimizerSpec(text);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status();
  return spec.ok() ? *spec : OptimizerSpec{};
}

std::string Error(const std::string& text) {
  absl::StatusOr<OptimizerSpec> spec = ParseOptimizerSpec(text);
  EXPECT_FALSE(spec.ok()) << text << " parsed";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(OptimizerSpecTest, PlainNamesParse) {
  EXPECT_EQ(Parsed("adamw").kind, Kind::kAdamW);
  const OptimizerSpec muon = Parsed("muon");
  EXPECT_EQ(muon.kind, Kind::kMuon);
  EXPECT_EQ(muon.schedule, Schedule::kStandard);
  EXPECT_EQ(muon.period, 1);
  EXPECT_FALSE(muon.norm);
  EXPECT_EQ(muon.boost, 1.0);
  EXPECT_TRUE(muon.stack);
  EXPECT_EQ(Parsed("muon:short").schedule, Schedule::kShort);
}

TEST(OptimizerSpecTest, OptionsCombineInAnyOrder) {
  const OptimizerSpec a = Parsed("muon:short,period=3,norm,boost=1.5,stack=off");
  EXPECT_EQ(a.kind, Kind::kMuon);
  EXPECT_EQ(a.schedule, Schedule::kShort);
  EXPECT_EQ(a.period, 3);
  EXPECT_TRUE(a.norm);
  EXPECT_EQ(a.boost, 1.5);
  EXPECT_FALSE(a.stack);
  EXPECT_EQ(Parsed("muon:short,stack=off,boost=1.5,norm,period=3"), a);
  EXPECT_EQ(Parsed("muon,period=3").period, 3);
  EXPECT_TRUE(Parsed("muon,stack=on").stack);
}

TEST(OptimizerSpecTest, ToStringIsCanonicalAndParsesBack) {
  for (const char* text : {"adamw", "muon", "muon:short", "muon:short,period=3",
                           "muon,norm", "muon:short,boost=5", "muon,stack=off",
                           "muon:short,period=2,norm,boost=1.5,stack=off"}) {
    const OptimizerSpec spec = Parsed(text);
    EXPECT_EQ(spec.ToString(), text);
    EXPECT_EQ(Parsed(spec.ToString()), spec);
  }
  EXPECT_EQ(Parsed("muon:short,stack=off,norm").ToString(), "muon:short,norm,stack=off");
}

TEST(OptimizerSpecTest, UnknownOptionListsTheChoices) {
  EXPECT_EQ(Error("muon:short,perod=3"),
            "unknown optimizer option \"perod=3\" (expected period=K, norm, boost=G, stack=off)");
  EXPECT_EQ(Error("muon,norm=1"),
            "unknown optimizer option \"norm=1\" (expected period=K, norm, boost=G, stack=off)");
  EXPECT_EQ(Error("muon,period"),
            "unknown optimizer option \"period\" (expected period=K, norm, boost=G, stack=off)");
}

TEST(OptimizerSpecTest, UnknownOptimizerListsTheNames) {
  EXPECT_EQ(Error("adam"), "unknown optimizer \"adam\" (expected adamw, muon or muon:short)");
  EXPECT_EQ(Error("muon:shrt,norm"),
            "unknown optimizer \"muon:shrt\" (expected adamw, muon or muon:short)");
  EXPECT_EQ(Error(""), "unknown optimizer \"\" (expected adamw, muon or muon:short)");
}

TEST(OptimizerSpecTest, BadValuesSayWhatIsExpected) {
  EXPECT_EQ(Error("muon,period=0"),
            "optimizer option period=K: K must be a positive integer (got \"0\")");
  EXPECT_EQ(Error("muon,period=x"),
            "optimizer option period=K: K must be a positive integer (got \"x\")");
  EXPECT_EQ(Error("muon,boost=0.5"), "optimizer option boost=G: G must be a number ≥ 1 (got \"0.5\")");
  EXPECT_EQ(Error("muon,boost=nan"), "optimizer option boost=G: G must be a number ≥ 1 (got \"nan\")");
  EXPECT_EQ(Error("muon,stack=no"), "optimizer option stack=no: expected stack=off or stack=on");
}

TEST(OptimizerSpecTest, RepeatedEmptyAndMisplacedOptionsAreErrors) {
  EXPECT_EQ(Error("muon,norm,norm"), "optimizer option \"norm\" given twice in \"muon,norm,norm\"");
  EXPECT_EQ(Error("muon,period=2,period=3"),
            "optimizer option \"period\" given twice in \"muon,period=2,period=3\"");
  EXPECT_EQ(Error("muon,"),
            "empty optimizer option in \"muon,\" (expected period=K, norm, boost=G, stack=off)");
  EXPECT_EQ(Error("adamw,norm"),
            "optimizer \"adamw,norm\": adamw takes no options (period=K, norm, boost=G and "
            "stack=off apply to muon and muon:short)");
}

TEST(OptimizerSpecTest, RunSpecValidatesTheOptimizerAndMuonRate) {
  RunSpec spec;
  spec.optimizer = "muon:short,period=3";
  EXPECT_TRUE(spec.Validate().ok()) << spec.Validate();
  spec.optimizer = "muon:short,perod=3";
  EXPECT_EQ(spec.Validate().message(),
            "\"optimizer\": unknown optimizer option \"perod=3\" (expected period=K, norm, "
            "boost=G, stack=off)");
  spec.optimizer = "muon";
  spec.muon_lr = 0;
  EXPECT_EQ(spec.Validate().message(), "\"muon_lr\": must be positive (got 0)");
}

TEST(OptimizerSpecTest, MuonTakesTheRunsRateUnlessMuonLrIsSet) {
  RunSpec spec;
  spec.lr = 0.004;
  EXPECT_FALSE(spec.muon_lr.has_value());
  EXPECT_EQ(spec.MuonLr(), 0.004);
  EXPECT_FALSE(spec.ToJson().contains("muon_lr"));
  spec.muon_lr = 0.02;
  EXPECT_EQ(spec.MuonLr(), 0.02);
}

TEST(OptimizerSpecTest, RunSpecJsonCarriesMuonRate) {
  nlohmann::json j = RunSpec().ToJson();
  j["muon_lr"] = 0.05;
  j["optimizer"] = "muon:short,norm";
  absl::StatusOr<RunSpec> back = RunSpec::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->muon_lr, 0.05);
  EXPECT_EQ(back->optimizer, "muon:short,norm");
  EXPECT_EQ(back->ToJson(), j);
  j["muon_lr"] = "fast";
  EXPECT_EQ(RunSpec::FromJson(j).status().message(), "\"muon_lr\": expected a number");
}

}  // namespace
}  // namespace smallem
