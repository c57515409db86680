#include "server/http/metrics_text.h"

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

void Header(std::string& out, absl::string_view name, absl::string_view type,
            absl::string_view help) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

// A label value with \, " and newlines escaped as the format requires.
std::string Label(absl::string_view value) {
  return absl::StrReplaceAll(value, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

// Whole numbers in full (byte counts), others to 9 significant digits.
std::string Number(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v > -1e18 && v < 1e18) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.9g", v);
}

void Gauge(std::string& out, absl::string_view name, absl::string_view help, double value,
           absl::string_view type = "gauge") {
  Header(out, name, type, help);
  absl::StrAppend(&out, name, " ", Number(value), "\n");
}

void AppendRpcs(std::string& out, const RpcMetrics& rpcs) {
  const auto methods = rpcs.Snapshot();
  Header(out, "smallem_rpc_requests_total", "counter",
         "gRPC calls served, by method and status code");
  for (const auto& [method, m] : methods) {
    for (const auto& [code, n] : m.calls_by_code) {
      absl::StrAppend(&out, "smallem_rpc_requests_total{method=\"", Label(method), "\",code=\"",
                      code, "\"} ", n, "\n");
    }
  }
  Header(out, "smallem_rpc_duration_seconds", "histogram",
         "gRPC call duration from arrival to status (streams: their whole life)");
  for (const auto& [method, m] : methods) {
    const std::string label = Label(method);
    for (size_t i = 0; i < RpcMetrics::kBucketSeconds.size(); ++i) {
      absl::StrAppend(&out, "smallem_rpc_duration_seconds_bucket{method=\"", label, "\",le=\"",
                      Number(RpcMetrics::kBucketSeconds[i]), "\"} ", m.buckets[i], "\n");
    }
    absl::StrAppend(&out, "smallem_rpc_duration_seconds_bucket{method=\"", label,
                    "\",le=\"+Inf\"} ", m.count, "\n");
    absl::StrAppend(&out, "smallem_rpc_duration_seconds_sum{method=\"", label, "\"} ",
                    Number(m.seconds_sum), "\n");
    absl::StrAppend(&out, "smallem_rpc_duration_seconds_count{method=\"", label, "\"} ",
                    m.count, "\n");
  }
}

}  // namespace

absl::StatusOr<std::string> RenderMetricsText(SqliteStore& store, WorkerRegistry& workers,
                                              const Clock& clock, const RpcMetrics& rpcs,
                                              int64_t alive_within_ms) {
  ASSIGN_OR_RETURN(StoreStats stats, store.Stats());
  ASSIGN_OR_RETURN(std::vector<WorkerView> listed, workers.List());
  std::string out;
  Header(out, "smallem_runs", "gauge", "Runs of every experiment, by status");
  const std::pair<const char*, int> by_status[] = {
      {"queued", stats.runs.queued},       {"leased", stats.runs.leased},
      {"succeeded", stats.runs.succeeded}, {"failed", stats.runs.failed},
      {"cancelled", stats.runs.cancelled}, {"diverged", stats.runs.diverged}};
  for (const auto& [status, n] : by_status) {
    absl::StrAppend(&out, "smallem_runs{status=\"", status, "\"} ", n, "\n");
  }
  Gauge(out, "smallem_queue_depth", "Runs waiting for a worker (status queued)",
        stats.runs.queued);
  Gauge(out, "smallem_leases_granted_total", "Leases ever granted (attempts started)",
        static_cast<double>(stats.attempts), "counter");
  Gauge(out, "smallem_leases_lost_total",
        "Attempts that ended with their lease lost (expired or given up)",
        static_cast<double>(stats.leases_lost), "counter");

  const int64_t now = clock.NowUnixMs();
  int alive = 0, devices = 0;
  for (const WorkerView& w : listed) {
    if (now - w.record.last_seen_unix_ms > alive_within_ms) continue;
    ++alive;
    const nlohmann::json d =
        nlohmann::json::parse(w.record.devices_json, nullptr, /*allow_exceptions=*/false);
    if (d.is_array()) devices += static_cast<int>(d.size());
  }
  Gauge(out, "smallem_workers_registered", "Workers ever registered",
        static_cast<double>(listed.size()));
  Gauge(out, "smallem_workers_alive", "Workers seen within one lease duration", alive);
  Gauge(out, "smallem_devices_alive", "Devices of the workers alive", devices);

  AppendRpcs(out, rpcs);

  Header(out, "smallem_store_commit_seconds", "summary",
         "Time to commit the store's write transactions (fsync included)");
  absl::StrAppend(&out, "smallem_store_commit_seconds_sum ", Number(stats.commit_seconds_sum),
                  "\nsmallem_store_commit_seconds_count ", stats.commits, "\n");
  Gauge(out, "smallem_datasets", "Complete datasets stored", static_cast<double>(stats.datasets));
  Gauge(out, "smallem_dataset_bytes", "Bytes of the complete datasets stored",
        static_cast<double>(stats.dataset_bytes));
  return out;
}

}  // namespace smallem
