#include "server/queue/result_schema.h"

#include "nlohmann/json.hpp"
#include "runspec/run_result.h"

namespace smallem {

absl::Status CheckResultJson(const nlohmann::json& result) {
  return RunResult::FromJson(result).status();
}

}  // namespace smallem
