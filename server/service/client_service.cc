#include "server/service/client_service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "rpc/grpc_status.h"
#include "server/queue/experiment_status.h"
#include "server/queue/sequential_looks.h"
#include "server/queue/submission.h"
#include "server/report/experiment_report.h"
#include "server/service/dataset_upload.h"
#include "server/service/proto_convert.h"
#include "server/service/request_checks.h"

namespace smallem {
namespace {

// A following StreamMetrics wakes on every queue change, and at least this
// often to notice a client that left.
constexpr absl::Duration kStreamIdleCheck = absl::Seconds(1);

absl::StatusOr<ExperimentRecord> ResolveExperiment(SqliteStore& store, int64_t id,
                                                   const std::string& name) {
  if (id > 0) return store.GetExperiment(id);
  if (!name.empty()) return store.FindExperiment(name);
  return absl::InvalidArgumentError("give an experiment id or name");
}

// The runs a Cancel or Retry names; NotFound for an experiment or run that
// does not exist (a typo must not read as "nothing to do").
absl::StatusOr<RunSelector> Selector(SqliteStore& store, int64_t experiment_id,
                                     const google::protobuf::RepeatedField<int64_t>& run_ids) {
  if (experiment_id < 0) return absl::InvalidArgumentError("experiment_id: must be positive");
  if (experiment_id > 0) {
    RETURN_IF_ERROR(store.GetExperiment(experiment_id).status());
    return RunSelector{.experiment_id = experiment_id, .run_ids = {}};
  }
  if (run_ids.empty()) return absl::InvalidArgumentError("give an experiment id or run ids");
  constexpr int kMaxRunIds = 100'000;
  if (run_ids.size() > kMaxRunIds) {
    return absl::InvalidArgumentError(absl::StrCat("run_ids: at most ", kMaxRunIds));
  }
  for (int64_t id : run_ids) {
    if (id <= 0) return absl::InvalidArgumentError(absl::StrCat("run_ids: ", id, " is not a run id"));
    RETURN_IF_ERROR(store.GetRun(id).status());
  }
  return RunSelector{.experiment_id = 0, .run_ids = {run_ids.begin(), run_ids.end()}};
}

}  // namespace

grpc::Status ClientServiceImpl::HasDataset(grpc::ServerContext*,
                                           const v1::HasDatasetRequest* request,
                                           v1::HasDatasetResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckContentHash(request->content_hash()));
    ASSIGN_OR_RETURN(std::optional<int64_t> bytes, store_->DatasetBytes(request->content_hash()));
    response->set_present(bytes.has_value());
    response->set_total_bytes(bytes.value_or(0));
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::UploadDataset(grpc::ServerContext* context,
                                              grpc::ServerReader<v1::DatasetChunk>* reader,
                                              v1::UploadDatasetResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const std::unique_ptr<StreamGate::Ticket> ticket,
                     upload_dataset_gate_.Enter(context));
    DatasetUpload upload(store_, clock_, disk_reserve_);
    v1::DatasetChunk chunk;
    while (reader->Read(&chunk)) {
      ticket->Progress();
      absl::Status added = CheckContentHash(chunk.content_hash());
      if (added.ok()) added = upload.Add(
          chunk.content_hash(),
          DatasetChunkRef{.file_name = chunk.file_name(), .file_size = chunk.file_size(),
                          .offset = chunk.offset(),
                          .length = static_cast<int64_t>(chunk.data().size())},
          chunk.data());
      if (!added.ok()) {
        upload.Abandon();
        return added;
      }
    }
    if (ticket->idled_out()) {
      upload.Abandon();
      return ticket->IdleError();
    }
    ASSIGN_OR_RETURN(UploadSummary summary, upload.Finish());
    response->set_content_hash(summary.content_hash);
    response->set_total_bytes(summary.total_bytes);
    response->set_files(summary.files);
    response->set_already_present(summary.already_present);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::Submit(grpc::ServerContext*, const v1::SubmitRequest* request,
                                       v1::SubmitResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    GridSubmission submission{
        .yaml = request->grid_yaml(), .file_name = request->grid_file_name(),
        .dataset_hashes = {request->dataset_hashes().begin(), request->dataset_hashes().end()},
        .retry_budget = request->retry_budget()};
    if (submission.file_name.empty()) submission.file_name = "grid.yaml";
    ASSIGN_OR_RETURN(SubmittedGrid submitted,
                     SubmitGrid(*store_, *clock_, submission,
                                queue_->options().default_retry_budget,
                                queue_->options().max_runs_per_submission));
    response->set_experiment_id(submitted.outcome.experiment_id);
    response->set_experiment_name(submitted.experiment_name);
    response->set_runs_total(submitted.outcome.total);
    response->set_runs_added(submitted.outcome.added);
    response->set_runs_reissued(submitted.outcome.reissued);
    response->set_runs_unchanged(submitted.outcome.unchanged);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::ListExperiments(grpc::ServerContext*,
                                                const v1::ListExperimentsRequest* request,
                                                v1::ListExperimentsResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    if (request->limit() < 0) return absl::InvalidArgumentError("limit: must not be negative");
    const int limit = request->limit() == 0 ? 100 : std::min(request->limit(), 10'000);
    ASSIGN_OR_RETURN(std::vector<ExperimentRecord> experiments, store_->ListExperiments(limit));
    int hidden = 0;
    for (const ExperimentRecord& e : experiments) {
      ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store_->ListRuns(e.id));
      const ExperimentSummary summary = SummarizeRuns(runs);
      if (!request->include_cancelled() && IsCancelledAndEmpty(summary.counts)) {
        ++hidden;
        continue;
      }
      ToProto(e, summary, response->add_experiments());
    }
    response->set_hidden(hidden);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::GetExperiment(grpc::ServerContext*,
                                              const v1::GetExperimentRequest* request,
                                              v1::GetExperimentResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    ASSIGN_OR_RETURN(ExperimentRecord e,
                     ResolveExperiment(*store_, request->experiment_id(), request->name()));
    ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store_->ListRuns(e.id));
    ASSIGN_OR_RETURN(std::vector<ResultRecord> results, store_->ListResults(e.id));
    std::map<int64_t, ResultRecord> by_run;
    for (ResultRecord& r : results) by_run.emplace(r.run_id, std::move(r));
    ToProto(e, SummarizeRuns(runs), response->mutable_experiment());
    ASSIGN_OR_RETURN(std::vector<LookDecisionRecord> decisions, store_->ListLookDecisions(e.id));
    // A stored grid that no longer reads costs the looks' lines, not the
    // status of the runs.
    absl::StatusOr<std::optional<LooksSummary>> looks = SummarizeLooks(e, runs, decisions);
    if (!looks.ok()) {
      response->mutable_experiment()->set_looks_text(
          absl::StrCat("sequential seeds: ", looks.status().message(), "\n"));
    } else if (*looks) {
      response->mutable_experiment()->set_looks_text(RenderLooks(**looks, false));
    }
    for (const RunRecord& run : runs) {
      auto it = by_run.find(run.id);
      std::optional<ResultRecord> result;
      if (it != by_run.end()) result = it->second;
      // Specs are left out of the list (GetRun has them): a large grid's
      // runs would otherwise repeat them thousands of times.
      ToProto(run, "", result, response->add_runs());
    }
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::GetRun(grpc::ServerContext*, const v1::GetRunRequest* request,
                                       v1::GetRunResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    if (request->run_id() <= 0) return absl::InvalidArgumentError("run_id: required");
    ASSIGN_OR_RETURN(RunRecord run, store_->GetRun(request->run_id()));
    ASSIGN_OR_RETURN(ExperimentRecord e, store_->GetExperiment(run.experiment_id));
    ASSIGN_OR_RETURN(std::string spec, ComposeRunSpec(run, e.dataset_hash));
    ASSIGN_OR_RETURN(std::optional<ResultRecord> result, store_->GetResult(run.id));
    ToProto(run, spec, result, response->mutable_run());
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::StreamMetrics(
    grpc::ServerContext* context, const v1::StreamMetricsRequest* request,
    grpc::ServerWriter<v1::StreamMetricsResponse>* writer) {
  return ToGrpcStatus([&]() -> absl::Status {
    // A follower holds a server thread for as long as it watches: their
    // number is capped, so that watchers cannot starve every other call.
    if (request->run_id() <= 0) return absl::InvalidArgumentError("run_id: required");
    if (request->after_step() < -1) {
      return absl::InvalidArgumentError("after_step: a step, or -1 for every point");
    }
    const bool counted = request->follow();
    if (counted && following_streams_.fetch_add(1) >= max_following_streams_) {
      following_streams_.fetch_sub(1);
      return absl::ResourceExhaustedError(absl::StrCat(
          max_following_streams_, " streams already follow runs on this coordinator; "
          "try again when one ends (or read without following)"));
    }
    absl::Cleanup release = [&] {
      if (counted) following_streams_.fetch_sub(1);
    };
    int64_t after = request->after_step();
    int attempt = -1;
    while (!context->IsCancelled()) {
      const uint64_t seen = queue_->changes();  // before reading: no change is missed
      ASSIGN_OR_RETURN(RunRecord run, store_->GetRun(request->run_id()));
      // A new attempt starts its curve over.
      if (run.attempt != attempt) {
        if (attempt != -1) after = -1;
        attempt = run.attempt;
      }
      ASSIGN_OR_RETURN(std::vector<MetricPointRecord> points,
                       store_->ListMetricPoints(run.id, run.attempt, after));
      v1::StreamMetricsResponse response;
      for (const MetricPointRecord& p : points) {
        ToProto(p, response.add_points());
        after = p.step;
      }
      ASSIGN_OR_RETURN(std::optional<ResultRecord> result, store_->GetResult(run.id));
      ToProto(run, "", result, response.mutable_run());
      if (!writer->Write(response)) return absl::OkStatus();  // the client left
      if (!request->follow() || IsFinished(run.status)) return absl::OkStatus();
      queue_->WaitForChange(seen, kStreamIdleCheck);
    }
    return absl::CancelledError("the client cancelled the stream");
  }());
}

grpc::Status ClientServiceImpl::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                       v1::CancelResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    ASSIGN_OR_RETURN(RunSelector selector,
                     Selector(*store_, request->experiment_id(), request->run_ids()));
    ASSIGN_OR_RETURN(int n, queue_->Cancel(selector));
    response->set_cancelled(n);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::Retry(grpc::ServerContext*, const v1::RetryRequest* request,
                                      v1::RetryResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    ASSIGN_OR_RETURN(RunSelector selector,
                     Selector(*store_, request->experiment_id(), request->run_ids()));
    ASSIGN_OR_RETURN(int n, queue_->Retry(selector));
    response->set_requeued(n);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::DeleteExperiment(grpc::ServerContext*,
                                                 const v1::DeleteExperimentRequest* request,
                                                 v1::DeleteExperimentResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    ASSIGN_OR_RETURN(ExperimentRecord e,
                     ResolveExperiment(*store_, request->experiment_id(), request->name()));
    ASSIGN_OR_RETURN(DeletedExperiment deleted, queue_->DeleteExperiment(e.id, request->force()));
    response->set_name(deleted.name);
    response->set_runs(deleted.runs);
    response->set_results(deleted.results);
    response->set_metric_points(deleted.metric_points);
    response->set_checkpoints(deleted.checkpoints);
    response->set_leased(deleted.leased);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::Report(grpc::ServerContext*, const v1::ReportRequest* request,
                                       v1::ReportResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    ASSIGN_OR_RETURN(ExperimentRecord e,
                     ResolveExperiment(*store_, request->experiment_id(), request->name()));
    // nats/byte: a floor above 1 would call every difference noise.
    if (!(request->noise_floor() >= 0 && request->noise_floor() <= 1)) {
      return absl::InvalidArgumentError(
          "noise_floor: nats per byte in [0, 1] (0 = the default 0.002)");
    }
    if (!v1::ReportAt_IsValid(request->at())) {
      return absl::InvalidArgumentError(absl::StrCat("at: unknown value ", request->at()));
    }
    if (!v1::ReportFormat_IsValid(request->format())) {
      return absl::InvalidArgumentError(
          absl::StrCat("format: unknown value ", request->format()));
    }
    ReportOptions options;
    options.noise_floor = request->noise_floor();
    switch (request->at()) {
      case v1::REPORT_AT_STEPS: options.at = CompareAt::kSteps; break;
      case v1::REPORT_AT_TIME: options.at = CompareAt::kTime; break;
      default: options.at = CompareAt::kBoth; break;
    }
    options.plot = request->plot();
    options.noise_only = request->noise_only();
    switch (request->format()) {
      case v1::REPORT_FORMAT_MARKDOWN: options.format = ReportFormat::kMarkdown; break;
      case v1::REPORT_FORMAT_CSV: options.format = ReportFormat::kCsv; break;
      case v1::REPORT_FORMAT_JSON: options.format = ReportFormat::kJson; break;
      default: options.format = ReportFormat::kTable; break;
    }
    ASSIGN_OR_RETURN(RenderedReport report, RenderExperimentReport(*store_, e, options));
    response->set_text(report.text);
    response->set_runs_done(report.runs_done);
    response->set_runs_total(report.runs_total);
    response->set_plot_svg(report.plot_svg);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::ListWorkers(grpc::ServerContext*,
                                            const v1::ListWorkersRequest* request,
                                            v1::ListWorkersResponse* response) {
  return ToGrpcStatus([&]() -> absl::Status {
    constexpr int kMaxListedWorkers = 1000;
    if (request->seen_within_ms() < 0 || request->limit() < 0 ||
        request->limit() > kMaxListedWorkers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "seen_within_ms must be ≥ 0 and limit in [0, ", kMaxListedWorkers, "]"));
    }
    const int limit = request->limit() > 0 ? request->limit() : kMaxListedWorkers;
    ASSIGN_OR_RETURN(std::vector<WorkerView> workers, workers_->List());
    std::sort(workers.begin(), workers.end(), [](const WorkerView& a, const WorkerView& b) {
      return a.record.last_seen_unix_ms > b.record.last_seen_unix_ms;
    });
    const int64_t now = clock_->NowUnixMs();
    int omitted = 0;
    for (const WorkerView& w : workers) {
      const bool recent = request->seen_within_ms() == 0 ||
                          now - w.record.last_seen_unix_ms <= request->seen_within_ms();
      if ((!recent && w.leased_run_ids.empty()) || response->workers_size() >= limit) {
        ++omitted;
        continue;
      }
      v1::Worker* out = response->add_workers();
      out->set_worker_id(w.record.id);
      out->set_hostname(w.record.hostname);
      RETURN_IF_ERROR(DevicesFromJson(w.record.devices_json, out->mutable_devices()));
      out->set_registered_unix_ms(w.record.registered_unix_ms);
      out->set_last_seen_unix_ms(w.record.last_seen_unix_ms);
      out->set_slurm_job_id(w.record.slurm_job_id);
      out->set_slurm_node(w.record.slurm_node);
      for (int64_t id : w.leased_run_ids) out->add_leased_run_ids(id);
    }
    response->set_omitted(omitted);
    ASSIGN_OR_RETURN(const CheckpointUsage checkpoints, store_->GetCheckpointUsage());
    response->set_checkpoints(checkpoints.count);
    response->set_checkpoint_bytes(checkpoints.bytes);
    return absl::OkStatus();
  }());
}

grpc::Status ClientServiceImpl::Backup(grpc::ServerContext* context, const v1::BackupRequest*,
                                       grpc::ServerWriter<v1::BackupChunk>* writer) {
  return ToGrpcStatus([&]() -> absl::Status {
    // One at a time: each is a whole copy of the database beside it.
    if (backup_running_.exchange(true)) {
      return absl::ResourceExhaustedError(
          "a backup is under way on this coordinator; try again when it ends");
    }
    absl::Cleanup done = [&] { backup_running_.store(false); };
    // Copying counts as progress; a client that stops reading does not.
    ASSIGN_OR_RETURN(const std::unique_ptr<StreamGate::Ticket> ticket,
                     backup_gate_.Enter(context));
    const absl::Time deadline = absl::Now() + backup_deadline_;
    auto in_time = [&]() -> absl::Status {
      if (context->IsCancelled()) return absl::CancelledError("the client cancelled the backup");
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "the backup took longer than the coordinator allows (",
            absl::FormatDuration(backup_deadline_), "); its copy was removed"));
      }
      return absl::OkStatus();
    };
    // Room first: the copy, as large as the database, must leave the disk
    // reserve whole; it is claimed until the copy is gone.
    ASSIGN_OR_RETURN(const int64_t database_bytes, store_->DatabaseBytes());
    ASSIGN_OR_RETURN(const DiskClaim claim,
                     DiskClaim::Take(disk_reserve_, database_bytes, "a backup of the database"));
    const std::string copy = BackupCopyPath(store_->path(), getpid(), backup_count_.fetch_add(1));
    absl::Cleanup remove = [&] { RemoveBackupCopy(copy); };
    RETURN_IF_ERROR(store_->BackupTo(
        copy, BackupOptions{.between_steps = [&](int, int) {
          ticket->Progress();
          return in_time();
        }}));
    // Streamed a chunk at a time: a database holding datasets can be large.
    std::ifstream in(copy, std::ios::binary);
    std::error_code size_error;
    const auto total = static_cast<int64_t>(std::filesystem::file_size(copy, size_error));
    if (!in || size_error) return absl::InternalError(absl::StrCat("cannot read back ", copy));
    std::string buffer(1 << 20, '\0');
    int64_t offset = 0;
    while (offset < total) {
      RETURN_IF_ERROR(in_time());
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      const auto n = static_cast<size_t>(in.gcount());
      if (n == 0) return absl::InternalError(absl::StrCat(copy, " ended early"));
      v1::BackupChunk chunk;
      chunk.set_offset(offset);
      chunk.set_data(buffer.substr(0, n));
      chunk.set_total_bytes(total);
      if (!writer->Write(chunk)) {
        if (ticket->idled_out()) return ticket->IdleError();
        return absl::OkStatus();  // the client left
      }
      ticket->Progress();
      offset += static_cast<int64_t>(n);
    }
    return absl::OkStatus();
  }());
}

std::string BackupCopyPath(const std::string& db_path, int64_t pid, uint64_t n) {
  return absl::StrCat(db_path, kBackupCopyInfix, pid, "-", n);
}

void RemoveBackupCopy(const std::string& copy) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::error_code ignored;
    std::filesystem::remove(copy + suffix, ignored);
  }
}

int RemoveBackupCopies(const std::string& db_path) {
  const std::filesystem::path db = std::filesystem::absolute(db_path);
  const std::string prefix = db.filename().string() + kBackupCopyInfix;
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(db.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::error_code ignored;
    if (std::filesystem::remove(entry.path(), ignored)) ++removed;
  }
  return removed;
}

}  // namespace smallem
