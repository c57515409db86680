#include "server/service/proto_convert.h"

#include <cmath>

#include "nlohmann/json.hpp"

namespace smallem {

v1::RunStatus ToProto(RunStatus status) {
  switch (status) {
    case RunStatus::kQueued: return v1::RUN_STATUS_QUEUED;
    case RunStatus::kLeased: return v1::RUN_STATUS_LEASED;
    case RunStatus::kSucceeded: return v1::RUN_STATUS_SUCCEEDED;
    case RunStatus::kFailed: return v1::RUN_STATUS_FAILED;
    case RunStatus::kCancelled: return v1::RUN_STATUS_CANCELLED;
    case RunStatus::kDiverged: return v1::RUN_STATUS_DIVERGED;
  }
  return v1::RUN_STATUS_UNSPECIFIED;
}

v1::FailureClass ToProto(FailureClass failure) {
  switch (failure) {
    case FailureClass::kNone: return v1::FAILURE_CLASS_UNSPECIFIED;
    case FailureClass::kLeaseLost: return v1::FAILURE_CLASS_LEASE_LOST;
    case FailureClass::kEngineError: return v1::FAILURE_CLASS_ENGINE_ERROR;
    case FailureClass::kInvalidConfig: return v1::FAILURE_CLASS_INVALID_CONFIG;
    case FailureClass::kDiverged: return v1::FAILURE_CLASS_DIVERGED;
  }
  return v1::FAILURE_CLASS_UNSPECIFIED;
}

FailureClass FromProto(v1::FailureClass failure) {
  switch (failure) {
    case v1::FAILURE_CLASS_LEASE_LOST: return FailureClass::kLeaseLost;
    case v1::FAILURE_CLASS_ENGINE_ERROR: return FailureClass::kEngineError;
    case v1::FAILURE_CLASS_INVALID_CONFIG: return FailureClass::kInvalidConfig;
    case v1::FAILURE_CLASS_DIVERGED: return FailureClass::kDiverged;
    default: return FailureClass::kNone;
  }
}

void ToProto(const ProgressRecord& p, v1::Progress* out) {
  out->set_step(p.step);
  out->set_total_steps(p.total_steps);
  out->set_loss(p.loss);
  out->set_tokens_per_s(p.tokens_per_s);
  out->set_elapsed_s(p.elapsed_s);
  out->set_eta_s(p.eta_s);
  out->set_max_over_mean_load(p.max_over_mean_load);
}

ProgressRecord FromProto(const v1::Progress& p) {
  // SQLite stores NaN as NULL, which the schema refuses: a diverged run's
  // NaN loss is recorded as +infinity (still "not a number you can
  // compare"), and a non-finite rate or time as 0 (unknown).
  const auto finite_or = [](double v, double instead) { return std::isfinite(v) ? v : instead; };
  return ProgressRecord{.step = p.step(), .total_steps = p.total_steps(),
                        .loss = std::isnan(p.loss()) ? HUGE_VAL : p.loss(),
                        .tokens_per_s = finite_or(p.tokens_per_s(), 0),
                        .elapsed_s = finite_or(p.elapsed_s(), 0),
                        .eta_s = finite_or(p.eta_s(), 0),
                        .max_over_mean_load = finite_or(p.max_over_mean_load(), 0)};
}

std::vector<ProgressRecord> FromProto(
    const google::protobuf::RepeatedPtrField<v1::Progress>& points) {
  std::vector<ProgressRecord> out;
  out.reserve(points.size());
  for (const v1::Progress& p : points) out.push_back(FromProto(p));
  return out;
}

void ToProto(const RunRecord& run, const std::string& spec_json,
             const std::optional<ResultRecord>& result, v1::Run* out) {
  out->set_run_id(run.id);
  out->set_experiment_id(run.experiment_id);
  out->set_variant(run.variant);
  out->set_spec_hash(run.spec_hash);
  out->set_spec_json(spec_json);
  out->set_seed(run.seed);
  out->set_budget(run.budget);
  out->set_status(ToProto(run.status));
  out->set_attempt(run.attempt);
  out->set_engine_failures(run.engine_failures);
  out->set_lease_losses(run.lease_losses);
  out->set_retry_budget(run.retry_budget);
  if (run.status == RunStatus::kLeased) {
    out->set_worker_id(run.lease_worker);
    out->set_lease_expires_unix_ms(run.lease_expires_unix_ms);
  }
  out->set_device(run.lease_device);
  out->set_device_class(run.lease_device_class);
  ToProto(run.progress, out->mutable_progress());
  out->set_last_failure(ToProto(run.last_failure));
  out->set_last_error(run.last_error);
  if (run.status == RunStatus::kDiverged) {
    out->set_diverged_step(run.diverged_step);
    if (run.last_finite_loss) out->set_last_finite_loss(*run.last_finite_loss);
  }
  if (result) out->set_result_json(result->result_json);
  out->set_created_unix_ms(run.created_unix_ms);
  out->set_updated_unix_ms(run.updated_unix_ms);
}

void ToProto(const ExperimentRecord& e, const ExperimentSummary& s, v1::Experiment* out) {
  out->set_experiment_id(e.id);
  out->set_name(e.name);
  out->set_baseline(e.baseline);
  out->set_grid_file(e.grid_file);
  out->set_created_unix_ms(e.created_unix_ms);
  out->set_updated_unix_ms(e.updated_unix_ms);
  v1::RunCounts* c = out->mutable_counts();
  c->set_queued(s.counts.queued);
  c->set_leased(s.counts.leased);
  c->set_succeeded(s.counts.succeeded);
  c->set_failed(s.counts.failed);
  c->set_cancelled(s.counts.cancelled);
  c->set_diverged(s.counts.diverged);
  c->set_total(s.counts.total);
  out->set_steps_done(s.steps_done);
  out->set_steps_total(s.steps_total);
  out->set_eta_s(s.eta_s);
}

void ToProto(const MetricPointRecord& p, v1::MetricPoint* out) {
  out->set_attempt(p.attempt);
  out->set_step(p.step);
  out->set_loss(p.loss);
  out->set_tokens_per_s(p.tokens_per_s);
  out->set_elapsed_s(p.elapsed_s);
  out->set_unix_ms(p.unix_ms);
  out->set_max_over_mean_load(p.max_over_mean_load);
}

std::string DevicesToJson(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  nlohmann::json list = nlohmann::json::array();
  for (const v1::Device& d : devices) {
    list.push_back({{"name", d.name()},
                    {"device_class", d.device_class()},
                    {"memory_bytes", d.memory_bytes()}});
  }
  return list.dump();
}

absl::Status DevicesFromJson(const std::string& json,
                             google::protobuf::RepeatedPtrField<v1::Device>* out) {
  nlohmann::json list = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return absl::InvalidArgumentError("devices_json is not a list");
  for (const nlohmann::json& d : list) {
    if (!d.is_object()) return absl::InvalidArgumentError("devices_json holds a non-object");
    v1::Device* device = out->Add();
    device->set_name(d.value("name", ""));
    device->set_device_class(d.value("device_class", ""));
    device->set_memory_bytes(d.value("memory_bytes", int64_t{0}));
  }
  return absl::OkStatus();
}

}  // namespace smallem
