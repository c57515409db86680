#include "runspec/run_result.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace smallem {
namespace {

using nlohmann::json;
using namespace result_keys;

constexpr size_t kMaxResultStringBytes = 256;

// The typed fields, each with its key: one table for reading and writing.
template <typename T>
struct Field {
  const char* key;
  std::optional<T> RunResult::*member;
};
constexpr Field<double> kNumbers[] = {
    {kValNatsPerToken, &RunResult::val_nats_per_token},
    {kValBitsPerByte, &RunResult::val_bits_per_byte},
    {kEpochs, &RunResult::epochs},
    {kTrainSeconds, &RunResult::train_seconds},
    {kTokensPerS, &RunResult::tokens_per_s},
    {kMfu, &RunResult::mfu},
    {kFinalTrainLoss, &RunResult::final_train_loss},
    {kFinalLr, &RunResult::final_lr},
    {kGenerationTokensPerS, &RunResult::generation_tokens_per_s},
};
constexpr Field<int64_t> kIntegers[] = {
    {kEvalBatches, &RunResult::eval_batches},
    {kEvalSpans, &RunResult::eval_spans},
    {kEvalTokens, &RunResult::eval_tokens},
    {kSteps, &RunResult::steps},
    {kTokens, &RunResult::tokens},
    {kParams, &RunResult::params},
    {kActiveParams, &RunResult::active_params},
    {kMtpParams, &RunResult::mtp_params},
    {kPeakMemoryBytes, &RunResult::peak_memory_bytes},
    {kKvCacheBytesPerToken, &RunResult::kv_cache_bytes_per_token},
    {kSeed, &RunResult::seed},
    {kResumes, &RunResult::resumes},
    {kGenerationTokens, &RunResult::generation_tokens},
};
constexpr Field<std::string> kStrings[] = {
    {kEvalFingerprint, &RunResult::eval_fingerprint},
    {kActivations, &RunResult::activations},
    {kDevice, &RunResult::device},
    {kDeviceClass, &RunResult::device_class},
    {kDataset, &RunResult::dataset},
};

// What Complete checks, in the order its errors are reported. Fields not
// listed are kept whatever they hold (results carry more, for people and
// scripts).
enum class Kind { kNumber, kInteger, kString };
struct Checked {
  const char* key;
  Kind kind;
};
constexpr Checked kChecked[] = {
    {kValNatsPerByte, Kind::kNumber},       {kTrainSeconds, Kind::kNumber},
    {kValNatsPerToken, Kind::kNumber},      {kValBitsPerByte, Kind::kNumber},
    {kTokensPerS, Kind::kNumber},           {kEpochs, Kind::kNumber},
    {kGenerationTokensPerS, Kind::kNumber}, {kSteps, Kind::kInteger},
    {kTokens, Kind::kInteger},              {kParams, Kind::kInteger},
    {kSeed, Kind::kInteger},                {kEvalBatches, Kind::kInteger},
    {kKvCacheBytesPerToken, Kind::kInteger}, {kDevice, Kind::kString},
    {kDeviceClass, Kind::kString},          {kEvalFingerprint, Kind::kString},
};

absl::Status Expected(const char* prefix, const char* field, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat(prefix, ": \"", field, "\" must be ", what));
}

bool IsFiniteNonNegative(const json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
}
bool IsNonNegativeInteger(const json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0;
}
bool IsShortString(const json& v) {
  return v.is_string() && v.get_ref<const std::string&>().size() <= kMaxResultStringBytes;
}

absl::Status CheckValue(const char* prefix, const char* key, Kind kind, const json& v) {
  switch (kind) {
    case Kind::kNumber:
      if (!IsFiniteNonNegative(v)) return Expected(prefix, key, "a finite number ≥ 0");
      break;
    case Kind::kInteger:
      if (!IsNonNegativeInteger(v)) return Expected(prefix, key, "an integer ≥ 0");
      break;
    case Kind::kString:
      if (!IsShortString(v)) return Expected(prefix, key, "a string of at most 256 bytes");
      break;
  }
  return absl::OkStatus();
}

// Complete's rules on the JSON `j`, an object.
absl::Status CheckResult(const json& j) {
  if (!j.contains(kValNatsPerByte)) {
    return absl::InvalidArgumentError(
        absl::StrCat("result_json: \"", kValNatsPerByte, "\" is required"));
  }
  for (const Checked& c : kChecked) {
    if (auto it = j.find(c.key); it != j.end()) {
      RETURN_IF_ERROR(CheckValue("result_json", c.key, c.kind, *it));
    }
  }
  return absl::OkStatus();
}

bool ReadNumbers(const json& v, std::vector<double>* out) {
  if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& n) { return n.is_number(); })) {
    return false;
  }
  out->clear();
  for (const json& n : v) out->push_back(n.get<double>());
  return true;
}

// Reads the field `key` into `r` when it is one and `v` has its type;
// false when the key is unknown or the value is not what the field holds.
bool ReadField(const std::string& key, const json& v, RunResult& r) {
  if (key == kValNatsPerByte) {
    if (!v.is_number()) return false;
    r.val_nats_per_byte = v.get<double>();
    return true;
  }
  // Written as null by the trainer: no peak known, a dense model.
  if ((key == kMfu || key == kRouting) && v.is_null()) return true;
  for (const Field<double>& f : kNumbers) {
    if (key != f.key) continue;
    if (!v.is_number()) return false;
    r.*f.member = v.get<double>();
    return true;
  }
  for (const Field<int64_t>& f : kIntegers) {
    if (key != f.key) continue;
    if (!v.is_number_integer()) return false;
    r.*f.member = v.get<int64_t>();
    return true;
  }
  for (const Field<std::string>& f : kStrings) {
    if (key != f.key) continue;
    if (!v.is_string()) return false;
    r.*f.member = v.get<std::string>();
    return true;
  }
  if (key == kCudaGraphs) {
    if (!v.is_boolean()) return false;
    r.cuda_graphs = v.get<bool>();
    return true;
  }
  if (key == kValMtpNatsPerToken) {
    std::vector<double> losses;
    if (!ReadNumbers(v, &losses)) return false;
    r.val_mtp_nats_per_token = std::move(losses);
    return true;
  }
  if (key == kConfig || key == kModel) {
    if (v.is_null()) return false;  // kept as it was, in `extra`
    (key == kConfig ? r.config : r.model) = v;
    return true;
  }
  if (key == kRouting) {
    const auto tokens = v.is_object() ? v.find(kRoutingTokensPerExpert) : v.end();
    const auto load = v.is_object() ? v.find(kRoutingMaxOverMeanLoad) : v.end();
    RoutingResult routing;
    if (v.size() != 2 || tokens == v.end() || load == v.end() || !load->is_number() ||
        !ReadNumbers(*tokens, &routing.tokens_per_expert)) {
      return false;
    }
    routing.max_over_mean_load = load->get<double>();
    r.routing = std::move(routing);
    return true;
  }
  return false;
}

// Every field of the object `j` read where it has its type; the rest kept.
RunResult ReadResult(const json& j) {
  RunResult r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!ReadField(it.key(), it.value(), r)) r.extra[it.key()] = it.value();
  }
  return r;
}

}  // namespace

json RunResult::ToJson() const {
  json j = json::object();
  j[kValNatsPerByte] = val_nats_per_byte;
  for (const Field<double>& f : kNumbers) {
    if (this->*f.member) j[f.key] = *(this->*f.member);
  }
  for (const Field<int64_t>& f : kIntegers) {
    if (this->*f.member) j[f.key] = *(this->*f.member);
  }
  for (const Field<std::string>& f : kStrings) {
    if (this->*f.member) j[f.key] = *(this->*f.member);
  }
  if (cuda_graphs) j[kCudaGraphs] = *cuda_graphs;
  if (val_mtp_nats_per_token) j[kValMtpNatsPerToken] = *val_mtp_nats_per_token;
  if (!config.is_null()) j[kConfig] = config;
  if (!model.is_null()) j[kModel] = model;
  if (!mfu) j[kMfu] = nullptr;
  j[kRouting] = routing ? json{{kRoutingTokensPerExpert, routing->tokens_per_expert},
                               {kRoutingMaxOverMeanLoad, routing->max_over_mean_load}}
                        : json(nullptr);
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

absl::StatusOr<RunResult> RunResult::FromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("result_json: not a JSON object");
  RETURN_IF_ERROR(CheckResult(j));
  return ReadResult(j);
}

absl::StatusOr<RunResult> RunResult::FromStoredJson(const json& j) {
  if (!j.is_object() || !j.contains(kValNatsPerByte) || !j[kValNatsPerByte].is_number()) {
    return absl::InvalidArgumentError(absl::StrCat("no numeric \"", kValNatsPerByte, "\""));
  }
  return ReadResult(j);
}

absl::Status RunResult::Validate() const { return CheckResult(ToJson()); }

json DivergedResult::ToJson() const {
  return {{kDiverged, true},
          {kDivergedStep, diverged_step},
          {kLastFiniteLoss, last_finite_loss ? json(*last_finite_loss) : json(nullptr)},
          {kSteps, steps},
          {kTrainSeconds, train_seconds},
          {kDevice, device},
          {kDeviceClass, device_class},
          {kConfig, config},
          {kDataset, dataset},
          {kSeed, seed}};
}

absl::StatusOr<DivergedResult> DivergedResult::FromJson(const json& j) {
  constexpr char kPrefix[] = "diverged result";
  if (!IsDivergedResultJson(j)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kPrefix, ": not a JSON object with \"", kDiverged, "\": true"));
  }
  if (!j.contains(kDivergedStep)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kPrefix, ": \"", kDivergedStep, "\" is required"));
  }
  DivergedResult d;
  for (const Checked& c : {Checked{kDivergedStep, Kind::kInteger}, Checked{kSteps, Kind::kInteger},
                           Checked{kSeed, Kind::kInteger}, Checked{kTrainSeconds, Kind::kNumber},
                           Checked{kDevice, Kind::kString}, Checked{kDeviceClass, Kind::kString},
                           Checked{kDataset, Kind::kString}}) {
    if (!j.contains(c.key)) continue;
    const json& v = j[c.key];
    RETURN_IF_ERROR(CheckValue(kPrefix, c.key, c.kind, v));
  }
  if (auto it = j.find(kLastFiniteLoss); it != j.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>())) {
      return Expected(kPrefix, kLastFiniteLoss, "a finite number or null");
    }
    d.last_finite_loss = it->get<double>();
  }
  if (auto it = j.find(kConfig); it != j.end()) {
    if (!it->is_object()) return Expected(kPrefix, kConfig, "an object (the run spec)");
    d.config = *it;
  }
  d.diverged_step = j[kDivergedStep].get<int64_t>();
  d.steps = j.value(kSteps, int64_t{0});
  d.seed = j.value(kSeed, int64_t{0});
  d.train_seconds = j.value(kTrainSeconds, 0.0);
  d.device = j.value(kDevice, "");
  d.device_class = j.value(kDeviceClass, "");
  d.dataset = j.value(kDataset, "");
  return d;
}

absl::Status DivergedResult::Validate() const { return FromJson(ToJson()).status(); }

bool IsDivergedResultJson(const json& j) {
  if (!j.is_object()) return false;
  const auto it = j.find(kDiverged);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace smallem
