// What a run's result JSON must look like to be recorded, checked when a
// worker completes a run so that no stored result can make a later report
// fail: RunResult::FromJson's rules (runspec/run_result.h). Fields it does not
// check are stored as they are (results carry more, for people and
// scripts); the coordinator stores the JSON the worker sent, not a
// re-serialization.
#ifndef SMALLEM_SERVER_QUEUE_RESULT_SCHEMA_H_
#define SMALLEM_SERVER_QUEUE_RESULT_SCHEMA_H_

#include "absl/status/status.h"
#include "nlohmann/json_fwd.hpp"

namespace smallem {

// OK when `result` reads as a RunResult (RunResult::FromJson); else its
// InvalidArgument, naming the first field that is not what it must be.
absl::Status CheckResultJson(const nlohmann::json& result);

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_RESULT_SCHEMA_H_
