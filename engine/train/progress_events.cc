#include "engine/train/progress_events.h"

#include <algorithm>

#include "nlohmann/json.hpp"
#include "runspec/run_result.h"

namespace smallem {
namespace {

constexpr char kEvent[] = "event";
constexpr char kProgressEvent[] = "progress";
constexpr char kCheckpointEvent[] = "checkpoint";
constexpr char kResultEvent[] = "result";
constexpr char kStep[] = "step";
constexpr char kTotalSteps[] = "total_steps";
constexpr char kLoss[] = "loss";
constexpr char kElapsedS[] = "elapsed_s";
constexpr char kEtaS[] = "eta_s";
constexpr char kPath[] = "path";
// Named as in the result JSON, where they mean the same.
constexpr const char* kTokensPerS = result_keys::kTokensPerS;
constexpr const char* kTrainSeconds = result_keys::kTrainSeconds;
constexpr const char* kMaxOverMeanLoad = result_keys::kRoutingMaxOverMeanLoad;
constexpr const char* kTokensPerExpert = result_keys::kRoutingTokensPerExpert;

// The object of an event line of kind `event`, or discarded. (Not
// json::value: it throws on an "event" that is not a string, and a line is
// whatever the child printed.)
nlohmann::json ParseEvent(const std::string& line, const char* event) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const auto kind = j.is_object() ? j.find(kEvent) : j.end();
  if (kind == j.end() || !kind->is_string() || kind->get_ref<const std::string&>() != event) {
    return nlohmann::json::value_t::discarded;
  }
  return j;
}

}  // namespace

std::string FormatProgressLine(const TrainProgress& p) {
  nlohmann::json line = {{kEvent, kProgressEvent},   {kStep, p.step},
                         {kTotalSteps, p.total_steps}, {kLoss, p.loss},
                         {kTokensPerS, p.tokens_per_s}, {kElapsedS, p.elapsed_s},
                         {kEtaS, p.eta_s}};
  // A mixture of experts' routing; a dense model's line has neither key.
  if (p.max_over_mean_load > 0) line[kMaxOverMeanLoad] = p.max_over_mean_load;
  if (!p.tokens_per_expert.empty()) line[kTokensPerExpert] = p.tokens_per_expert;
  return line.dump();
}

std::optional<TrainProgress> ParseProgressLine(const std::string& line) {
  const nlohmann::json j = ParseEvent(line, kProgressEvent);
  if (j.is_discarded()) return std::nullopt;
  auto number = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  TrainProgress p;
  p.step = static_cast<int64_t>(number(kStep));
  p.total_steps = static_cast<int64_t>(number(kTotalSteps));
  p.loss = number(kLoss);
  p.tokens_per_s = number(kTokensPerS);
  p.elapsed_s = number(kElapsedS);
  p.eta_s = number(kEtaS);
  p.max_over_mean_load = number(kMaxOverMeanLoad);
  // Only numbers count: a malformed list is dropped whole, never half read.
  auto tokens = j.find(kTokensPerExpert);
  if (tokens != j.end() && tokens->is_array() &&
      std::all_of(tokens->begin(), tokens->end(), [](const auto& n) { return n.is_number(); })) {
    for (const auto& n : *tokens) p.tokens_per_expert.push_back(n.get<double>());
  }
  return p;
}

std::string FormatCheckpointLine(const CheckpointWritten& w) {
  return nlohmann::json{{kEvent, kCheckpointEvent}, {kPath, w.path}, {kStep, w.steps},
                        {kTrainSeconds, w.train_seconds}}.dump();
}

std::optional<CheckpointWritten> ParseCheckpointLine(const std::string& line) {
  const nlohmann::json j = ParseEvent(line, kCheckpointEvent);
  if (j.is_discarded()) return std::nullopt;
  const auto path = j.find(kPath);
  const auto step = j.find(kStep);
  const auto seconds = j.find(kTrainSeconds);
  if (path == j.end() || !path->is_string() || step == j.end() || !step->is_number_integer() ||
      seconds == j.end() || !seconds->is_number()) {
    return std::nullopt;
  }
  return CheckpointWritten{.path = path->get<std::string>(), .steps = step->get<int64_t>(),
                           .train_seconds = seconds->get<double>()};
}

std::string FormatResultLine(const nlohmann::json& result) {
  return nlohmann::json{{kEvent, kResultEvent}, {kResultEvent, result}}.dump();
}

}  // namespace smallem
