// The training events a process prints on stdout, one JSON object a line:
// the worker's child (worker/child.h, read back by the daemon) and
// `smallemctl train --json-progress` write the same lines.
//   {"event":"progress","step":..,"total_steps":..,"loss":..,
//    "tokens_per_s":..,"elapsed_s":..,"eta_s":..}
//     plus "max_over_mean_load" and "tokens_per_expert" for a mixture of
//     experts (a dense model's line has neither)
//   {"event":"checkpoint","path":..,"step":..,"train_seconds":..}
//   {"event":"result","result":{..the result JSON..}}  (train only, last)
// Pure functions; no state.
#ifndef SMALLEM_ENGINE_TRAIN_PROGRESS_EVENTS_H_
#define SMALLEM_ENGINE_TRAIN_PROGRESS_EVENTS_H_

#include <optional>
#include <string>

#include "engine/train/checkpointer.h"
#include "engine/train/trainer.h"
#include "nlohmann/json_fwd.hpp"

namespace smallem {

// A progress event line, and back. ParseProgressLine returns nullopt for a
// line that is not JSON or not a progress event (the reader ignores it); a
// field that is missing or not a number reads as 0, a tokens_per_expert
// that is not a list of numbers as empty.
std::string FormatProgressLine(const TrainProgress& progress);
std::optional<TrainProgress> ParseProgressLine(const std::string& line);

// A checkpoint event line, and back: nullopt for any other line, or one
// whose path is not a string, step not an integer or train_seconds not a
// number.
std::string FormatCheckpointLine(const CheckpointWritten& written);
std::optional<CheckpointWritten> ParseCheckpointLine(const std::string& line);

// The result event line: `result` (RunResult or DivergedResult JSON) under
// "result".
std::string FormatResultLine(const nlohmann::json& result);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_PROGRESS_EVENTS_H_
