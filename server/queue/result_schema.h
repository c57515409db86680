// What a run's result JSON must look like to be recorded: the fields the
// report reads, with their types, checked when a worker completes a run, so
// that no stored result can make a later report fail. Fields not listed are
// kept as they are (results carry more, for people and scripts).
#ifndef SMALLEM_SERVER_QUEUE_RESULT_SCHEMA_H_
#define SMALLEM_SERVER_QUEUE_RESULT_SCHEMA_H_

#include "absl/status/status.h"
#include "nlohmann/json_fwd.hpp"

namespace smallem {

// OK when `result` is an object with a finite, non-negative number
// `val_nats_per_byte`, and every one of these that is present has its type:
// `train_seconds`, `val_nats_per_token`, `val_bits_per_byte`, `tokens_per_s`,
// `epochs`, `generation_tokens_per_s` (finite numbers ≥ 0); `steps`,
// `tokens`, `params`, `seed`, `eval_batches`, `kv_cache_bytes_per_token`
// (integers ≥ 0); `device`, `device_class`,
// `eval_fingerprint` (strings of at most 256 bytes). InvalidArgument naming
// the first field that is not, and what was expected.
absl::Status CheckResultJson(const nlohmann::json& result);

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_RESULT_SCHEMA_H_
