// WorkerServiceImpl: the smallem.v1.WorkerService handlers — registration,
// leases, heartbeats, completions, failures, releases and dataset downloads. Each
// validates its request (sizes included), calls WorkerRegistry / JobQueue /
// SqliteStore and converts the result; errors become gRPC codes in
// ToGrpcStatus only.
//
// Thread-safe; the dependencies must outlive the service.
#ifndef SMALLEM_SERVER_SERVICE_WORKER_SERVICE_H_
#define SMALLEM_SERVER_SERVICE_WORKER_SERVICE_H_

#include "base/clock.h"
#include "server/queue/job_queue.h"
#include "server/queue/worker_registry.h"
#include "server/service/disk_reserve.h"
#include "server/service/stream_gate.h"
#include "server/store/sqlite_store.h"
#include "smallem/v1/worker.grpc.pb.h"

namespace smallem {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // `streams`: the bounds on UploadCheckpoint and FetchCheckpoint streams,
  // each rpc's own (stream_gate.h).
  WorkerServiceImpl(SqliteStore* store, JobQueue* queue, WorkerRegistry* workers,
                    StreamLimits streams = {})
      : store_(store), queue_(queue), workers_(workers),
        upload_checkpoint_gate_("UploadCheckpoint", streams),
        fetch_checkpoint_gate_("FetchCheckpoint", streams) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Lease(grpc::ServerContext* context, const v1::LeaseRequest* request,
                     v1::LeaseResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status Complete(grpc::ServerContext* context, const v1::CompleteRequest* request,
                        v1::CompleteResponse* response) override;
  grpc::Status Fail(grpc::ServerContext* context, const v1::FailRequest* request,
                    v1::FailResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status FetchDataset(grpc::ServerContext* context,
                            const v1::FetchDatasetRequest* request,
                            grpc::ServerWriter<v1::DatasetChunk>* writer) override;
  // Checkpoints (server/service/checkpoint_upload.h, docs/reliability.md).
  grpc::Status UploadCheckpoint(grpc::ServerContext* context,
                                grpc::ServerReader<v1::CheckpointChunk>* reader,
                                v1::UploadCheckpointResponse* response) override;
  grpc::Status FetchCheckpoint(grpc::ServerContext* context,
                               const v1::FetchCheckpointRequest* request,
                               grpc::ServerWriter<v1::CheckpointChunk>* writer) override;

  // Where checkpoint uploads check for free disk (the database's file
  // system); none by default.
  void set_disk_reserve(DiskReserve reserve) { disk_reserve_ = std::move(reserve); }

 private:
  SqliteStore* const store_;
  JobQueue* const queue_;
  WorkerRegistry* const workers_;
  DiskReserve disk_reserve_;
  StreamGate upload_checkpoint_gate_;
  StreamGate fetch_checkpoint_gate_;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_WORKER_SERVICE_H_
