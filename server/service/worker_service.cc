#include "server/service/worker_service.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "nlohmann/json.hpp"
#include "rpc/grpc_status.h"
#include "server/queue/result_schema.h"
#include "server/service/checkpoint_upload.h"
#include "server/service/dataset_upload.h"
#include "server/service/proto_convert.h"
#include "server/service/request_checks.h"
#include "runspec/moe_config.h"

namespace smallem {
namespace {

constexpr size_t kMaxResultBytes = 1 << 20;
constexpr size_t kMaxFailMessageBytes = 4 << 10;
constexpr int kMaxPointsPerCall = 10'000;
// How long an idle worker waits before asking for work again.
constexpr int64_t kIdleRetryMs = 500;

absl::Status CheckWorkerWrite(const std::string& worker_id, int64_t run_id, int attempt) {
  RETURN_IF_ERROR(CheckWorkerId(worker_id));
  if (run_id <= 0) return absl::InvalidArgumentError("run_id: required");
  if (attempt <= 0) return absl::InvalidArgumentError("attempt: required (from the lease)");
  return absl::OkStatus();
}

// Progress points: at most kMaxPointsPerCall, steps not negative, at most
// MoeConfig::kMaxExperts tokens_per_expert, a load not negative.
absl::Status CheckPoints(const google::protobuf::RepeatedPtrField<v1::Progress>& points) {
  if (points.size() > kMaxPointsPerCall) {
    return absl::InvalidArgumentError(absl::StrCat("points: at most ", kMaxPointsPerCall));
  }
  for (const v1::Progress& p : points) {
    if (p.step() < 0 || p.total_steps() < 0) {
      return absl::InvalidArgumentError("points: step and total_steps must not be negative");
    }
    if (p.tokens_per_expert_size() > MoeConfig::kMaxExperts) {
      return absl::InvalidArgumentError(
          absl::StrCat("points: tokens_per_expert has ", p.tokens_per_expert_size(),
                       " entries; at most ", MoeConfig::kMaxExperts,
                       " (the most experts a model has)"));
    }
    if (p.max_over_mean_load() < 0) {
      return absl::InvalidArgumentError(
          "points: max_over_mean_load must not be negative (0 = dense, 1 = even routing)");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDevices(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  if (devices.empty()) {
    return absl::InvalidArgumentError("devices: a worker registers at least one device");
  }
  if (devices.size() > kMaxDevicesPerWorker) {
    return absl::InvalidArgumentError(absl::StrCat("devices: ", devices.size(), "; at most ",
                                                   kMaxDevicesPerWorker));
  }
  for (const v1::Device& d : devices) {
    if (d.name().empty() || d.name().size() > kMaxDeviceNameBytes ||
        d.device_class().size() > kMaxDeviceNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "devices: a device's name (required) and device_class are at most ",
          kMaxDeviceNameBytes, " bytes"));
    }
    if (d.memory_bytes() < 0) {
      return absl::InvalidArgumentError("devices: memory_bytes must not be negative (0 = unknown)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status WorkerServiceImpl::Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                                         v1::RegisterResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckDevices(request->devices()));
    RETURN_IF_ERROR(workers_->Register(WorkerRecord{.id = request->worker_id(),
                                                    .hostname = request->hostname(),
                                                    .slurm_job_id = request->slurm_job_id(),
                                                    .slurm_node = request->slurm_node(),
                                                    .devices_json =
                                                        DevicesToJson(request->devices())}));
    response->set_lease_duration_ms(queue_->options().lease_duration_ms);
    response->set_heartbeat_interval_ms(queue_->options().heartbeat_interval_ms);
    return absl::OkStatus();
  }());
}

grpc::Status WorkerServiceImpl::Lease(grpc::ServerContext*, const v1::LeaseRequest* request,
                                      v1::LeaseResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    if (request->device().empty() || request->device().size() > kMaxDeviceNameBytes ||
        request->device_class().size() > kMaxDeviceNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("device (required) and device_class: at most ", kMaxDeviceNameBytes,
                       " bytes"));
    }
    RETURN_IF_ERROR(workers_->Touch(request->worker_id()));
    ASSIGN_OR_RETURN(std::optional<smallem::Lease> lease,
                     queue_->LeaseRun(request->worker_id(), request->device(),
                                      request->device_class()));
    if (!lease) {
      response->set_leased(false);
      response->set_retry_after_ms(kIdleRetryMs);
      return absl::OkStatus();
    }
    response->set_leased(true);
    response->set_run_id(lease->run_id);
    response->set_attempt(lease->attempt);
    response->set_spec_json(lease->spec_json);
    response->set_dataset_hash(lease->dataset_hash);
    response->set_lease_expires_unix_ms(lease->expires_unix_ms);
    if (lease->checkpoint) {
      response->set_checkpoint_sha256(lease->checkpoint->sha256);
      response->set_checkpoint_step(lease->checkpoint->step);
      response->set_checkpoint_bytes(lease->checkpoint->total_bytes);
    }
    return absl::OkStatus();
  }());
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext*,
                                          const v1::HeartbeatRequest* request,
                                          v1::HeartbeatResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckWorkerWrite(request->worker_id(), request->run_id(), request->attempt()));
    RETURN_IF_ERROR(CheckPoints(request->points()));
    RETURN_IF_ERROR(workers_->Touch(request->worker_id()));
    ASSIGN_OR_RETURN(HeartbeatOutcome outcome,
                     queue_->Heartbeat(request->run_id(), request->attempt(),
                                       request->worker_id(), FromProto(request->points())));
    response->set_lease_expires_unix_ms(outcome.lease_expires_unix_ms);
    response->set_cancel(outcome.cancel);
    return absl::OkStatus();
  }());
}

grpc::Status WorkerServiceImpl::Complete(grpc::ServerContext*, const v1::CompleteRequest* request,
                                         v1::CompleteResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckWorkerWrite(request->worker_id(), request->run_id(), request->attempt()));
    if (request->result_json().size() > kMaxResultBytes) {
      return absl::InvalidArgumentError(absl::StrCat("result_json: at most ", kMaxResultBytes,
                                                     " bytes"));
    }
    RETURN_IF_ERROR(CheckPoints(request->points()));
    RETURN_IF_ERROR(
        CheckResultJson(nlohmann::json::parse(request->result_json(), nullptr, false)));
    RETURN_IF_ERROR(workers_->Touch(request->worker_id()));
    ASSIGN_OR_RETURN(bool duplicate,
                     queue_->Complete(request->run_id(), request->attempt(), request->worker_id(),
                                      request->result_json(), FromProto(request->points())));
    response->set_duplicate(duplicate);
    return absl::OkStatus();
  }());
}

grpc::Status WorkerServiceImpl::Fail(grpc::ServerContext*, const v1::FailRequest* request,
                                     v1::FailResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckWorkerWrite(request->worker_id(), request->run_id(), request->attempt()));
    const FailureClass failure = FromProto(request->failure_class());
    if (failure == FailureClass::kNone) {
      return absl::InvalidArgumentError("failure_class: required");
    }
    // Messages are for people; a runaway one is cut, not refused — on a
    // character boundary, without control sequences (base/text.h).
    const std::string message = SanitizeText(request->message(), kMaxFailMessageBytes);
    DivergenceRecord divergence;
    divergence.step = request->diverged_step();
    if (request->has_last_finite_loss() && std::isfinite(request->last_finite_loss())) {
      divergence.last_finite_loss = request->last_finite_loss();
    }
    RETURN_IF_ERROR(workers_->Touch(request->worker_id()));
    ASSIGN_OR_RETURN(bool will_retry,
                     queue_->Fail(request->run_id(), request->attempt(), request->worker_id(),
                                  failure, message, divergence));
    response->set_will_retry(will_retry);
    return absl::OkStatus();
  }());
}

grpc::Status WorkerServiceImpl::Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                                        v1::ReleaseResponse*) {
  return ToGrpcStatus([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckWorkerWrite(request->worker_id(), request->run_id(), request->attempt()));
    const std::string reason = SanitizeText(request->reason(), kMaxFailMessageBytes);
    RETURN_IF_ERROR(workers_->Touch(request->worker_id()));
    return queue_->Release(request->run_id(), request->attempt(), request->worker_id(), reason);
  }());
}

grpc::Status WorkerServiceImpl::FetchDataset(grpc::ServerContext* context,
                                             const v1::FetchDatasetRequest* request,
                                             grpc::ServerWriter<v1::DatasetChunk>* writer) {
  return ToGrpcStatus([&]() -> absl::Status {
    const std::string& hash = request->content_hash();
    RETURN_IF_ERROR(CheckContentHash(hash));
    ASSIGN_OR_RETURN(std::optional<int64_t> bytes, store_->DatasetBytes(hash));
    if (!bytes) return absl::NotFoundError(absl::StrCat("no complete dataset ", hash));
    ASSIGN_OR_RETURN(std::vector<DatasetChunkRef> chunks, store_->ListDatasetChunks(hash));
    for (const DatasetChunkRef& c : chunks) {
      if (context->IsCancelled()) return absl::CancelledError("the worker cancelled the fetch");
      v1::DatasetChunk chunk;
      chunk.set_content_hash(hash);
      chunk.set_file_name(c.file_name);
      chunk.set_file_size(c.file_size);
      chunk.set_offset(c.offset);
      ASSIGN_OR_RETURN(*chunk.mutable_data(), store_->ReadDatasetChunk(hash, c.file_name, c.offset));
      if (!writer->Write(chunk)) return absl::UnavailableError("the worker went away");
    }
    return absl::OkStatus();
  }());
}

grpc::Status WorkerServiceImpl::UploadCheckpoint(grpc::ServerContext* context,
                                                 grpc::ServerReader<v1::CheckpointChunk>* reader,
                                                 v1::UploadCheckpointResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const std::unique_ptr<StreamGate::Ticket> ticket,
                     upload_checkpoint_gate_.Enter(context));
    CheckpointUpload upload(store_, queue_->clock(), disk_reserve_);
    v1::CheckpointChunk chunk;
    bool touched = false;
    while (reader->Read(&chunk)) {
      ticket->Progress();
      if (!touched) {
        RETURN_IF_ERROR(CheckWorkerWrite(chunk.worker_id(), chunk.run_id(), chunk.attempt()));
        RETURN_IF_ERROR(workers_->Touch(chunk.worker_id()));
        touched = true;
      }
      const absl::Status added = upload.Add(CheckpointPiece{
          .worker_id = chunk.worker_id(), .run_id = chunk.run_id(), .attempt = chunk.attempt(),
          .step = chunk.step(), .sha256 = chunk.sha256(), .file_size = chunk.file_size(),
          .offset = chunk.offset(), .data = chunk.data()});
      if (!added.ok()) {
        upload.Abandon();
        return added;
      }
    }
    if (ticket->idled_out()) {
      upload.Abandon();
      return ticket->IdleError();
    }
    ASSIGN_OR_RETURN(const int64_t bytes, upload.Finish());
    response->set_stored_bytes(bytes);
    return absl::OkStatus();
  }());
}

grpc::Status WorkerServiceImpl::FetchCheckpoint(grpc::ServerContext* context,
                                                const v1::FetchCheckpointRequest* request,
                                                grpc::ServerWriter<v1::CheckpointChunk>* writer) {
  return ToGrpcStatus([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckWorkerWrite(request->worker_id(), request->run_id(), request->attempt()));
    ASSIGN_OR_RETURN(const std::unique_ptr<StreamGate::Ticket> ticket,
                     fetch_checkpoint_gate_.Enter(context));
    ASSIGN_OR_RETURN(const RunRecord run, store_->GetRun(request->run_id()));
    RETURN_IF_ERROR(CheckLease(run, request->attempt(), request->worker_id(),
                               queue_->clock()->NowUnixMs()));
    ASSIGN_OR_RETURN(const std::optional<CheckpointRecord> checkpoint,
                     store_->GetCheckpoint(request->run_id()));
    if (!checkpoint) {
      return absl::NotFoundError(absl::StrCat("run ", request->run_id(), " has no checkpoint"));
    }
    ASSIGN_OR_RETURN(const auto chunks,
                     store_->ListCheckpointChunks(checkpoint->run_id, checkpoint->sha256));
    for (const auto& [offset, length] : chunks) {
      if (context->IsCancelled()) return absl::CancelledError("the worker cancelled the fetch");
      v1::CheckpointChunk chunk;
      chunk.set_run_id(checkpoint->run_id);
      chunk.set_attempt(checkpoint->attempt);
      chunk.set_step(checkpoint->step);
      chunk.set_sha256(checkpoint->sha256);
      chunk.set_file_size(checkpoint->total_bytes);
      chunk.set_offset(offset);
      ASSIGN_OR_RETURN(*chunk.mutable_data(),
                       store_->ReadCheckpointChunk(checkpoint->run_id, checkpoint->sha256, offset));
      if (!writer->Write(chunk)) {
        if (ticket->idled_out()) return ticket->IdleError();
        return absl::UnavailableError("the worker went away");
      }
      ticket->Progress();
    }
    return absl::OkStatus();
  }());
}

}  // namespace smallem
