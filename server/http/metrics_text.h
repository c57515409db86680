// /metrics: the coordinator's state and traffic in the Prometheus text
// exposition format (version 0.0.4), for an operator's scraper. Every
// metric is named smallem_*; docs/dashboard.md § Metrics lists them:
// runs by status, queue depth, leases granted and lost, workers and devices
// alive, gRPC calls and their latency per method and code, store commits and
// their latency, datasets and their bytes.
#ifndef SMALLEM_SERVER_HTTP_METRICS_TEXT_H_
#define SMALLEM_SERVER_HTTP_METRICS_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "server/http/rpc_metrics.h"
#include "server/queue/worker_registry.h"
#include "server/store/sqlite_store.h"

namespace smallem {

// A worker counts as alive when its last call is at most `alive_within_ms`
// old (the coordinator passes its lease duration: a working worker calls
// at least that often). Errors of the store.
absl::StatusOr<std::string> RenderMetricsText(SqliteStore& store, WorkerRegistry& workers,
                                              const Clock& clock, const RpcMetrics& rpcs,
                                              int64_t alive_within_ms);

}  // namespace smallem

#endif  // SMALLEM_SERVER_HTTP_METRICS_TEXT_H_
