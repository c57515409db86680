// The client verbs: submit, status, watch, report, cancel, retry, workers.
// `run` is in cli/run_command.cc.
#include "cli/service_commands.h"

#include <cstdio>
#include <ctime>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/files.h"
#include "base/exit_codes.h"
#include "base/text.h"
#include "cli/progress.h"
#include "cli/service_client.h"
#include "cli/session.h"
#include "cli/status_view.h"
#include "server/report/plot.h"

namespace smallem::cli {
namespace {

ServiceClient Connect(const ServiceArgs& args) {
  return ServiceClient(args.coordinator.empty() ? DefaultCoordinatorAddress() : args.coordinator,
                       absl::Seconds(args.deadline_s), args.token_file, args.tls_ca);
}

// Fills the selector of a cancel/retry request from the arguments.
template <typename Request>
absl::StatusOr<Request> SelectRuns(ServiceClient& client, const CancelArgs& args) {
  Request request;
  if (!args.experiment.empty()) {
    absl::StatusOr<v1::GetExperimentResponse> e = client.GetExperiment(args.experiment);
    if (!e.ok()) return e.status();
    request.set_experiment_id(e->experiment().experiment_id());
  } else if (!args.run_ids.empty()) {
    for (int64_t id : args.run_ids) request.add_run_ids(id);
  } else {
    return absl::InvalidArgumentError("name an experiment or give --run IDs");
  }
  return request;
}

std::string FormatAge(int64_t unix_ms) {
  const double seconds = std::max<double>(0, std::time(nullptr) - unix_ms / 1000.0);
  return seconds < 1 ? "now" : absl::StrCat(FormatDuration(seconds), " ago");
}

}  // namespace

int RunSubmit(const SubmitArgs& args) {
  ServiceClient client = Connect(args.service);
  std::string budget_note;
  absl::StatusOr<v1::SubmitResponse> r =
      client.SubmitGridFile(args.grid, args.retry_budget, &budget_note);
  if (!r.ok()) return ReportError(r.status());
  if (!budget_note.empty()) std::printf("%s\n", budget_note.c_str());
  std::printf("experiment %s (id %lld): %s — %d queued, %d reissued, %d unchanged\n",
              r->experiment_name().c_str(), static_cast<long long>(r->experiment_id()),
              CountedNoun(r->runs_total(), "run", "runs").c_str(), r->runs_added(),
              r->runs_reissued(), r->runs_unchanged());
  std::printf("next: smallemctl status %s   (then: smallemctl report %s)\n",
              r->experiment_name().c_str(), r->experiment_name().c_str());
  return 0;
}

int RunStatus(const StatusArgs& args) {
  absl::StatusOr<Session> session = OpenSession(args.service);
  if (!session.ok()) return ReportError(session.status());
  ServiceClient& client = *session->client;
  if (args.experiment.empty()) {
    absl::StatusOr<v1::ListExperimentsResponse> list = client.ListExperiments(args.all);
    if (!list.ok()) return ReportError(list.status());
    if (list->experiments().empty() && list->hidden() == 0) {
      std::printf("no experiments yet; submit one with `smallemctl submit GRID`\n");
      return 0;
    }
    for (const v1::Experiment& e : list->experiments()) {
      std::printf("%s\n", FormatExperimentLine(e).c_str());
    }
    if (list->hidden() > 0) {
      std::printf("(%s whose every run was cancelled not shown: `smallemctl status --all`; "
                  "`smallemctl delete EXPERIMENT` removes one)\n",
                  CountedNoun(list->hidden(), "experiment", "experiments").c_str());
    }
    return 0;
  }
  absl::StatusOr<v1::GetExperimentResponse> e = client.GetExperiment(args.experiment);
  if (!e.ok()) return ReportError(ForSession(e.status(), args.service));
  std::printf("%s\n\n%s", FormatExperimentLine(e->experiment()).c_str(),
              FormatRunTable(e->runs()).c_str());
  if (!e->experiment().looks_text().empty()) {
    std::printf("\n%s", e->experiment().looks_text().c_str());
  }
  if (e->experiment().counts().failed() > 0) {
    std::printf("\nnext: smallemctl retry %s   (requeues the failed runs)\n",
                e->experiment().name().c_str());
  }
  return 0;
}

int RunWatch(const WatchArgs& args) {
  ServiceClient client = Connect(args.service);
  ProgressLine line(stdout, /*plain_interval_s=*/5.0);
  v1::Run last;
  absl::Status status = client.StreamMetrics(args.run_id, [&](const v1::StreamMetricsResponse& r) {
    last = r.run();
    line.Update(FormatRunLine(last));
    return true;
  });
  // No line for a run never heard of (run 999): only the error.
  if (last.run_id() != 0) line.Update(FormatRunLine(last), /*force=*/true);
  line.Finish();
  if (absl::IsNotFound(status)) {
    return ReportError(absl::NotFoundError(absl::StrCat(
        status.message(), " (`smallemctl status EXPERIMENT` lists an experiment's runs)")));
  }
  if (!status.ok()) return ReportError(status);
  // Sequential seeds: where the run's experiment's arms stand now that it
  // ended (a look it closed may have stopped its arm or queued more seeds).
  if (last.experiment_id() != 0 && last.status() != v1::RUN_STATUS_QUEUED &&
      last.status() != v1::RUN_STATUS_LEASED) {
    absl::StatusOr<v1::GetExperimentResponse> e =
        client.GetExperiment(absl::StrCat(last.experiment_id()));
    if (e.ok() && !e->experiment().looks_text().empty()) {
      std::printf("%s", e->experiment().looks_text().c_str());
    }
  }
  if (last.status() == v1::RUN_STATUS_FAILED) {
    std::printf("failed: %s\n", last.last_error().c_str());
    return 1;
  }
  if (last.status() == v1::RUN_STATUS_CANCELLED) {
    std::printf("cancelled (`smallemctl retry --run %lld` queues it again)\n",
                static_cast<long long>(last.run_id()));
    return 1;
  }
  if (last.status() == v1::RUN_STATUS_DIVERGED) {
    std::printf("%s: %s\n", DivergedText(last).c_str(), last.last_error().c_str());
    return 1;
  }
  if (last.status() == v1::RUN_STATUS_SUCCEEDED) {
    std::printf("%s", FormatResult(last.result_json()).c_str());
  }
  return 0;
}

int RunReport(const ReportArgs& args) {
  absl::StatusOr<v1::ReportRequest> request =
      MakeReportRequest(args.at, args.format, args.noise_floor);
  if (!request.ok()) return ReportError(request.status());
  request->set_noise_only(args.noise_only);
  if (!args.plot.empty()) {
    // Checked before asking: a bad path should not cost a report.
    if (absl::Status ok = CheckPlotPath(args.plot); !ok.ok()) return ReportError(ok);
    request->set_plot(true);
  }
  absl::StatusOr<Session> session = OpenSession(args.service);
  if (!session.ok()) return ReportError(session.status());
  absl::StatusOr<v1::ReportResponse> report =
      session->client->Report(*request, args.experiment);
  if (!report.ok()) return ReportError(ForSession(report.status(), args.service));
  std::fputs(report->text().c_str(), stdout);
  if (!args.plot.empty()) {
    if (absl::Status written = WriteFileDurably(args.plot, report->plot_svg()); !written.ok()) {
      return ReportError(written);
    }
    std::fprintf(stderr, "figure written to %s\n", args.plot.c_str());
  }
  if (report->runs_done() < report->runs_total() && args.format == "table") {
    std::printf("\n%d of %d runs done; `smallemctl status %s%s` shows the rest.\n",
                report->runs_done(), report->runs_total(), args.experiment.c_str(),
                args.service.db.empty() ? "" : (" --db " + args.service.db).c_str());
  }
  return 0;
}

int RunCancel(const CancelArgs& args) {
  ServiceClient client = Connect(args.service);
  absl::StatusOr<v1::CancelRequest> request = SelectRuns<v1::CancelRequest>(client, args);
  if (!request.ok()) return ReportError(request.status());
  absl::StatusOr<v1::CancelResponse> r = client.Cancel(*request);
  if (!r.ok()) return ReportError(r.status());
  if (r->cancelled() == 0) {
    // Say why: only queued and running runs can be cancelled.
    std::printf("nothing cancelled: none of the selected runs is queued or running "
                "(`smallemctl status%s%s` shows each run's state)\n",
                args.experiment.empty() ? "" : " ", args.experiment.c_str());
    return args.run_ids.empty() ? kExitOk : kExitError;
  }
  std::printf("cancelled %d run%s (`smallemctl retry` queues them again)\n", r->cancelled(),
              r->cancelled() == 1 ? "" : "s");
  return 0;
}

int RunRetry(const RetryArgs& args) {
  ServiceClient client = Connect(args.service);
  absl::StatusOr<v1::RetryRequest> request = SelectRuns<v1::RetryRequest>(client, args);
  if (!request.ok()) return ReportError(request.status());
  absl::StatusOr<v1::RetryResponse> r = client.Retry(*request);
  if (!r.ok()) return ReportError(r.status());
  if (r->requeued() == 0) {
    std::printf("nothing requeued: only failed and cancelled runs are retried, and none of the "
                "selected runs is (`smallemctl status%s%s` shows each run's state)\n",
                args.experiment.empty() ? "" : " ", args.experiment.c_str());
    return args.run_ids.empty() ? kExitOk : kExitError;
  }
  std::printf("requeued %d run%s\n", r->requeued(), r->requeued() == 1 ? "" : "s");
  return 0;
}

int RunDelete(const DeleteArgs& args) {
  ServiceClient client = Connect(args.service);
  absl::StatusOr<v1::DeleteExperimentResponse> r =
      client.DeleteExperiment(args.experiment, args.force);
  if (!r.ok()) return ReportError(r.status());
  std::printf("deleted experiment %s: %s, %s, %s, %s\n", r->name().c_str(),
              CountedNoun(r->runs(), "run", "runs").c_str(),
              CountedNoun(r->results(), "result", "results").c_str(),
              CountedNoun(r->metric_points(), "metric point", "metric points").c_str(),
              CountedNoun(r->checkpoints(), "checkpoint", "checkpoints").c_str());
  if (r->leased() > 0) {
    std::printf("%s running on workers: they stop at their next heartbeat\n",
                CountedNoun(r->leased(), "run was", "runs were").c_str());
  }
  return 0;
}

int RunWorkers(const WorkersArgs& args) {
  ServiceClient client = Connect(args.service);
  v1::ListWorkersRequest request;
  if (!args.all) request.set_seen_within_ms(10 * 60 * 1000);
  absl::StatusOr<v1::ListWorkersResponse> r = client.ListWorkers(request);
  if (!r.ok()) return ReportError(r.status());
  const auto note_omitted = [&] {
    if (r->omitted() > 0) {
      std::printf("(%d more not seen for 10 minutes: `smallemctl workers --all`)\n",
                  r->omitted());
    }
  };
  if (r->workers().empty()) {
    note_omitted();
    std::printf("no workers; start one with `smallem-worker --coordinator %s`\n",
                client.address().c_str());
    return 0;
  }
  for (const v1::Worker& w : r->workers()) {
    std::printf("%s  (%s)  last seen %s\n", w.worker_id().c_str(), w.hostname().c_str(),
                FormatAge(w.last_seen_unix_ms()).c_str());
    if (!w.slurm_job_id().empty()) {
      std::printf("  slurm job %s on node %s\n", w.slurm_job_id().c_str(),
                  w.slurm_node().empty() ? "?" : w.slurm_node().c_str());
    }
    for (const v1::Device& d : w.devices()) {
      std::printf("  %-8s %s%s\n", d.name().c_str(), d.device_class().c_str(),
                  d.memory_bytes() > 0
                      ? absl::StrFormat("  %.1f GiB", d.memory_bytes() / 1073741824.0).c_str()
                      : "");
    }
    if (!w.leased_run_ids().empty()) {
      std::string runs;
      for (int64_t id : w.leased_run_ids()) absl::StrAppend(&runs, runs.empty() ? "" : ", ", id);
      std::printf("  running: %s\n", runs.c_str());
    }
  }
  note_omitted();
  // The coordinator's disk held for resuming runs (docs/reliability.md).
  std::printf("checkpoints: %d held, %s\n", r->checkpoints(),
              absl::StrFormat("%.1f MiB", r->checkpoint_bytes() / 1048576.0).c_str());
  return 0;
}

int RunBackup(const BackupArgs& args) {
  ServiceClient client = Connect(args.service);
  absl::StatusOr<int64_t> bytes = client.Backup(args.file);
  if (!bytes.ok()) return ReportError(bytes.status());
  std::printf("wrote %s (%lld bytes), a consistent copy of %s's database\n", args.file.c_str(),
              static_cast<long long>(*bytes), client.address().c_str());
  std::printf("to serve it: smallem-coordinator --db %s\n", args.file.c_str());
  return 0;
}

}  // namespace smallem::cli
