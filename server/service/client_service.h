// ClientServiceImpl: the smallem.v1.ClientService handlers. Each validates
// its request, calls the domain object (SqliteStore, JobQueue, SubmitGrid,
// DatasetUpload, RenderExperimentReport, WorkerRegistry) and converts the
// result; errors become gRPC codes in ToGrpcStatus only.
//
// Thread-safe (gRPC calls handlers concurrently); the dependencies must
// outlive the service.
#ifndef SMALLEM_SERVER_SERVICE_CLIENT_SERVICE_H_
#define SMALLEM_SERVER_SERVICE_CLIENT_SERVICE_H_

#include <atomic>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "base/clock.h"
#include "server/queue/job_queue.h"
#include "server/queue/worker_registry.h"
#include "server/service/dataset_upload.h"
#include "server/service/stream_gate.h"
#include "server/store/sqlite_store.h"
#include "smallem/v1/client.grpc.pb.h"

namespace smallem {

class ClientServiceImpl final : public v1::ClientService::Service {
 public:
  // `max_following_streams`: StreamMetrics calls with follow set that may
  // be open at once; each holds one of gRPC's server threads while it waits.
  // `backup_deadline`: how long a Backup may take, copy and transfer.
  // `streams`: the bounds on UploadDataset and Backup streams, each rpc's
  // own (stream_gate.h; one Backup runs at a time in any case).
  ClientServiceImpl(SqliteStore* store, JobQueue* queue, WorkerRegistry* workers,
                    const Clock* clock, DiskReserve disk_reserve = {},
                    int max_following_streams = 64,
                    absl::Duration backup_deadline = absl::Hours(1), StreamLimits streams = {})
      : store_(store), queue_(queue), workers_(workers), clock_(clock),
        disk_reserve_(std::move(disk_reserve)), max_following_streams_(max_following_streams),
        backup_deadline_(backup_deadline), upload_dataset_gate_("UploadDataset", streams),
        backup_gate_("Backup", streams) {}

  grpc::Status HasDataset(grpc::ServerContext* context, const v1::HasDatasetRequest* request,
                          v1::HasDatasetResponse* response) override;
  grpc::Status UploadDataset(grpc::ServerContext* context,
                             grpc::ServerReader<v1::DatasetChunk>* reader,
                             v1::UploadDatasetResponse* response) override;
  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                      v1::SubmitResponse* response) override;
  grpc::Status ListExperiments(grpc::ServerContext* context,
                               const v1::ListExperimentsRequest* request,
                               v1::ListExperimentsResponse* response) override;
  grpc::Status GetExperiment(grpc::ServerContext* context,
                             const v1::GetExperimentRequest* request,
                             v1::GetExperimentResponse* response) override;
  grpc::Status GetRun(grpc::ServerContext* context, const v1::GetRunRequest* request,
                      v1::GetRunResponse* response) override;
  grpc::Status StreamMetrics(grpc::ServerContext* context,
                             const v1::StreamMetricsRequest* request,
                             grpc::ServerWriter<v1::StreamMetricsResponse>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status Retry(grpc::ServerContext* context, const v1::RetryRequest* request,
                     v1::RetryResponse* response) override;
  grpc::Status DeleteExperiment(grpc::ServerContext* context,
                                const v1::DeleteExperimentRequest* request,
                                v1::DeleteExperimentResponse* response) override;
  grpc::Status Report(grpc::ServerContext* context, const v1::ReportRequest* request,
                      v1::ReportResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;
  // Copies the database beside itself (DB.backup-PID-N), streams the copy
  // and removes it.
  grpc::Status Backup(grpc::ServerContext* context, const v1::BackupRequest* request,
                      grpc::ServerWriter<v1::BackupChunk>* writer) override;

 private:
  SqliteStore* const store_;
  JobQueue* const queue_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  const DiskReserve disk_reserve_;
  const int max_following_streams_;
  std::atomic<int> following_streams_{0};
  const absl::Duration backup_deadline_;
  std::atomic<bool> backup_running_{false};
  std::atomic<uint64_t> backup_count_{0};  // names each copy
  StreamGate upload_dataset_gate_;
  StreamGate backup_gate_;
};

// Backup's copies: "<database>.backup-<pid>-<n>" beside the database, mode
// 0600, removed once sent or refused.
inline constexpr char kBackupCopyInfix[] = ".backup-";
std::string BackupCopyPath(const std::string& db_path, int64_t pid, uint64_t n);
// Removes a copy and what SQLite may have left beside it.
void RemoveBackupCopy(const std::string& copy);
// Removes every copy beside the database at `db_path` — left by a
// coordinator that stopped mid-backup (at start-up, when none is under
// way). Returns how many files went.
int RemoveBackupCopies(const std::string& db_path);

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_CLIENT_SERVICE_H_
