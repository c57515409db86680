// Internal to SqliteStore (sqlite_store*.cc): the SELECT that reads a run
// with its variant, and the function that turns its row into a RunRecord.
#ifndef SMALLEM_SERVER_STORE_SQLITE_STORE_ROWS_H_
#define SMALLEM_SERVER_STORE_SQLITE_STORE_ROWS_H_

#include <string_view>

#include "base/status_macros.h"
#include "server/store/sqlite.h"
#include "server/store/store_types.h"

namespace smallem {

inline constexpr std::string_view kRunSelect =
    "SELECT r.id, r.experiment_id, r.variant_id, v.name, v.kind, v.spec_json, r.spec_hash, "
    "r.seed, r.budget, r.budget_steps, r.budget_minutes, r.status, r.attempt, "
    "r.engine_failures, r.lease_losses, r.retry_budget, r.lease_worker, r.lease_device, "
    "r.lease_device_class, r.lease_expires_unix_ms, r.progress_step, r.progress_total_steps, "
    "r.progress_loss, r.progress_tokens_per_s, r.progress_elapsed_s, r.progress_eta_s, "
    "r.last_failure, r.last_error, r.created_unix_ms, r.updated_unix_ms, r.diverged_step, "
    "r.last_finite_loss, r.progress_max_over_mean_load "
    "FROM runs r JOIN variants v ON v.id = r.variant_id";

// Reads the current row of a statement that starts with kRunSelect.
RunRecord ReadRunRow(const SqliteStatement& s);

}  // namespace smallem

#endif  // SMALLEM_SERVER_STORE_SQLITE_STORE_ROWS_H_
