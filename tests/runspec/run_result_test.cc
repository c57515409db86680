#include "runspec/run_result.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A result as the trainer writes it for a dense model on the CPU (no peak
// FLOPs known: mfu null), every field filled.
RunResult Finished() {
  RunResult r;
  r.val_nats_per_byte = 1.25;
  r.val_nats_per_token = 4.5;
  r.val_bits_per_byte = 1.8;
  r.eval_batches = 4;
  r.eval_spans = 64;
  r.eval_tokens = 4096;
  r.eval_fingerprint = "ab12";
  r.steps = 300;
  r.tokens = 614400;
  r.epochs = 0.5;
  r.train_seconds = 12.5;
  r.tokens_per_s = 49152.0;
  r.params = 1000;
  r.active_params = 1000;
  r.peak_memory_bytes = 1 << 20;
  r.kv_cache_bytes_per_token = 2048;
  r.final_train_loss = 4.25;
  r.final_lr = 3e-4;
  r.cuda_graphs = false;
  r.activations = "f32";
  r.device = "cpu";
  r.device_class = "cpu";
  r.config = {{"arch", "gpt2"}, {"seed", 1}};
  r.model = {{"layers", 2}};
  r.dataset = "cafe";
  r.seed = 1;
  r.resumes = 0;
  r.generation_tokens = 31;
  r.generation_tokens_per_s = 120.5;
  return r;
}

TEST(RunResultTest, JsonRoundTripKeepsEveryField) {
  RunResult r = Finished();
  r.mfu = 0.25;
  r.routing = RoutingResult{.tokens_per_expert = {3, 5}, .max_over_mean_load = 1.25};
  r.val_mtp_nats_per_token = std::vector<double>{4.6, 4.9};
  r.mtp_params = 77;
  absl::StatusOr<RunResult> back = RunResult::FromJson(r.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_TRUE(back->extra.empty());
}

TEST(RunResultTest, ToJsonWritesTheTrainersKeysAndTypes) {
  const json j = Finished().ToJson();
  // A dense model without a known peak: mfu and routing are null, not
  // missing; the MTP fields are absent.
  EXPECT_TRUE(j.at("mfu").is_null());
  EXPECT_TRUE(j.at("routing").is_null());
  EXPECT_FALSE(j.contains("val_mtp_nats_per_token"));
  EXPECT_FALSE(j.contains("mtp_params"));
  EXPECT_TRUE(j.at("steps").is_number_integer());
  EXPECT_TRUE(j.at("train_seconds").is_number_float());
  EXPECT_TRUE(j.at("cuda_graphs").is_boolean());
  EXPECT_EQ(j.at("val_nats_per_byte"), 1.25);
  EXPECT_EQ(j.at("config").at("arch"), "gpt2");
  EXPECT_EQ(j.size(), 31u);
  RunResult moe = Finished();
  moe.routing = RoutingResult{.tokens_per_expert = {2, 6}, .max_over_mean_load = 1.5};
  EXPECT_EQ(moe.ToJson().at("routing"),
            json::parse(R"({"tokens_per_expert":[2.0,6.0],"max_over_mean_load":1.5})"));
}

TEST(RunResultTest, AnOldResultWithExtraKeysAndMissingOptionalOnesReads) {
  // Written before eval_fingerprint, generation speed, routing and resumes
  // existed, with a key this version does not know.
  const json old = json::parse(R"({"val_nats_per_byte":1.5,"train_seconds":3.0,"steps":200,
      "params":900,"device":"cpu","device_class":"Xeon","notes":{"by":"hand"},"mfu":0.1})");
  absl::StatusOr<RunResult> r = RunResult::FromJson(old);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->val_nats_per_byte, 1.5);
  EXPECT_EQ(r->steps, 200);
  EXPECT_EQ(r->device_class, "Xeon");
  EXPECT_EQ(r->mfu, 0.1);
  EXPECT_FALSE(r->eval_fingerprint.has_value());
  EXPECT_FALSE(r->generation_tokens_per_s.has_value());
  EXPECT_FALSE(r->resumes.has_value());
  EXPECT_FALSE(r->routing.has_value());
  EXPECT_TRUE(r->config.is_null());
  // The unknown key is kept, and written back.
  EXPECT_EQ(r->extra, json::parse(R"({"notes":{"by":"hand"}})"));
  EXPECT_EQ(r->ToJson().at("notes"), old.at("notes"));
}

TEST(RunResultTest, AnUncheckedFieldOfAnotherTypeIsKeptAsItWas) {
  // Complete never checked mfu or routing: a result with others is stored.
  const json j = json::parse(R"({"val_nats_per_byte":1.0,"mfu":"n/a","routing":[1,2]})");
  absl::StatusOr<RunResult> r = RunResult::FromJson(j);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->mfu.has_value());
  EXPECT_FALSE(r->routing.has_value());
  EXPECT_EQ(r->ToJson().at("mfu"), "n/a");
  EXPECT_EQ(r->ToJson().at("routing"), json::parse("[1,2]"));
}

TEST(RunResultTest, EveryCheckedFieldIsRefusedWithItsNameAndWhatWasExpected) {
  const json base = {{"val_nats_per_byte", 1.0}};
  EXPECT_EQ(RunResult::FromJson(json::array({1.2})).status().message(),
            "result_json: not a JSON object");
  EXPECT_EQ(RunResult::FromJson(json{{"train_seconds", 3.0}}).status().message(),
            "result_json: \"val_nats_per_byte\" is required");
  for (const char* field : {"val_nats_per_byte", "train_seconds", "val_nats_per_token",
                            "val_bits_per_byte", "tokens_per_s", "epochs",
                            "generation_tokens_per_s"}) {
    for (const json& bad : {json(-0.5), json("1.2"), json(nullptr)}) {
      json j = base;
      j[field] = bad;
      SCOPED_TRACE(j.dump());
      const absl::Status status = RunResult::FromJson(j).status();
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(status.message(),
                absl::StrCat("result_json: \"", field, "\" must be a finite number ≥ 0"));
    }
  }
  for (const char* field : {"steps", "tokens", "params", "seed", "eval_batches",
                            "kv_cache_bytes_per_token"}) {
    for (const json& bad : {json(-4), json(2.5), json("7")}) {
      json j = base;
      j[field] = bad;
      SCOPED_TRACE(j.dump());
      EXPECT_EQ(RunResult::FromJson(j).status().message(),
                absl::StrCat("result_json: \"", field, "\" must be an integer ≥ 0"));
    }
  }
  for (const char* field : {"device", "device_class", "eval_fingerprint"}) {
    for (const json& bad : {json(5), json(std::string(257, 'x'))}) {
      json j = base;
      j[field] = bad;
      SCOPED_TRACE(field);
      EXPECT_EQ(RunResult::FromJson(j).status().message(),
                absl::StrCat("result_json: \"", field, "\" must be a string of at most 256 bytes"));
    }
    json j = base;
    j[field] = std::string(256, 'x');
    EXPECT_TRUE(RunResult::FromJson(j).ok()) << field;
  }
}

TEST(RunResultTest, TheFirstBadFieldInCheckOrderIsNamed) {
  // Numbers before integers before strings, as Complete always reported.
  const json j = json::parse(R"({"val_nats_per_byte":-1,"steps":"x","device":5})");
  EXPECT_THAT(RunResult::FromJson(j).status().message(), HasSubstr("\"val_nats_per_byte\""));
}

TEST(RunResultTest, ValidateAppliesFromJsonsRules) {
  EXPECT_TRUE(Finished().Validate().ok());
  RunResult r = Finished();
  r.train_seconds = std::numeric_limits<double>::infinity();
  EXPECT_EQ(r.Validate().message(), "result_json: \"train_seconds\" must be a finite number ≥ 0");
  r = Finished();
  r.steps = -1;
  EXPECT_EQ(r.Validate().message(), "result_json: \"steps\" must be an integer ≥ 0");
  r = Finished();
  r.device = std::string(300, 'd');
  EXPECT_EQ(r.Validate().message(), "result_json: \"device\" must be a string of at most 256 bytes");
}

TEST(RunResultTest, AStoredResultReadsWhateverItsOtherFieldsHold) {
  // Stored before Complete checked results: a report reads what it can.
  absl::StatusOr<RunResult> r = RunResult::FromStoredJson(
      json::parse(R"({"val_nats_per_byte":1.25,"device_class":5,"params":"x","steps":-3})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->val_nats_per_byte, 1.25);
  EXPECT_FALSE(r->device_class.has_value());
  EXPECT_FALSE(r->params.has_value());
  EXPECT_EQ(r->steps, -3);
  EXPECT_EQ(RunResult::FromStoredJson(json::parse(R"({"val_nats_per_byte":"1.2"})"))
                .status()
                .message(),
            "no numeric \"val_nats_per_byte\"");
  EXPECT_FALSE(RunResult::FromStoredJson(json::parse("[1]")).ok());
}

DivergedResult Diverged() {
  return DivergedResult{.diverged_step = 40,
                        .last_finite_loss = 5.25,
                        .steps = 40,
                        .train_seconds = 2.5,
                        .device = "cpu",
                        .device_class = "Xeon",
                        .config = {{"lr", 1.0}},
                        .dataset = "cafe",
                        .seed = 3};
}

TEST(DivergedResultTest, JsonRoundTripAndItsKeys) {
  const json j = Diverged().ToJson();
  EXPECT_EQ(j.at("diverged"), true);
  EXPECT_EQ(j.at("diverged_step"), 40);
  EXPECT_EQ(j.size(), 10u);
  EXPECT_TRUE(IsDivergedResultJson(j));
  absl::StatusOr<DivergedResult> back = DivergedResult::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Diverged());
  EXPECT_TRUE(back->Validate().ok());

  DivergedResult none = Diverged();
  none.last_finite_loss.reset();
  EXPECT_TRUE(none.ToJson().at("last_finite_loss").is_null());
  back = DivergedResult::FromJson(none.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->last_finite_loss.has_value());
}

TEST(DivergedResultTest, AFinishedResultIsNotDivergedAndBadFieldsAreNamed) {
  EXPECT_FALSE(IsDivergedResultJson(Finished().ToJson()));
  EXPECT_FALSE(IsDivergedResultJson(json::parse(R"({"diverged":false})")));
  EXPECT_FALSE(DivergedResult::FromJson(Finished().ToJson()).ok());
  EXPECT_EQ(DivergedResult::FromJson(json::parse(R"({"diverged":true})")).status().message(),
            "diverged result: \"diverged_step\" is required");
  json j = Diverged().ToJson();
  j["diverged_step"] = -1;
  EXPECT_EQ(DivergedResult::FromJson(j).status().message(),
            "diverged result: \"diverged_step\" must be an integer ≥ 0");
  j = Diverged().ToJson();
  j["last_finite_loss"] = "5";
  EXPECT_EQ(DivergedResult::FromJson(j).status().message(),
            "diverged result: \"last_finite_loss\" must be a finite number or null");
  j = Diverged().ToJson();
  j["config"] = "lr=1";
  EXPECT_THAT(DivergedResult::FromJson(j).status().message(), HasSubstr("\"config\""));
  j = Diverged().ToJson();
  j["train_seconds"] = -2.0;
  EXPECT_THAT(DivergedResult::FromJson(j).status().message(), HasSubstr("\"train_seconds\""));
}

}  // namespace
}  // namespace smallem
