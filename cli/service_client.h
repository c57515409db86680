// ServiceClient: smallemctl's side of smallem.v1.ClientService — every call
// with a deadline, errors as absl::Status — plus the two steps of a
// submission: upload the grid's dataset (once, by content hash, in chunks)
// and submit the grid's text.
//
// Every call carries the client token, when there is one, as
// `authorization: Bearer <token>` (rpc/channel.h).
//
// Thread-safe (gRPC stubs are).
#ifndef SMALLEM_CLI_SERVICE_CLIENT_H_
#define SMALLEM_CLI_SERVICE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "smallem/v1/client.grpc.pb.h"

namespace smallem {

struct Grid;

// The coordinator smallemctl talks to by default: $SMALLEM_COORDINATOR, else
// 127.0.0.1:7070.
std::string DefaultCoordinatorAddress();

class ServiceClient {
 public:
  // Calls time out after `deadline` (uploads after 20 times as long). The
  // client token from `token_file`, else $SMALLEM_CLIENT_TOKEN; TLS with the
  // root certificate in `tls_ca_file`, else in the file $SMALLEM_TLS_CA
  // names, else plaintext. When a file cannot be read, every call fails
  // with that error (it names the file); so it does when `address` is not
  // HOST:PORT (CheckCoordinatorAddress).
  ServiceClient(const std::string& address, absl::Duration deadline,
                const std::string& token_file = "", const std::string& tls_ca_file = "");
  // Exactly `security`; the environment is not consulted.
  ServiceClient(const std::string& address, absl::Duration deadline,
                const ChannelSecurity& security);
  // Calls over `channel` (an in-process server's: ReadOnlyCoordinator),
  // named `name` in messages (address() returns it). Its errors are the
  // service's as they are: none is a coordinator out of reach.
  ServiceClient(std::shared_ptr<grpc::Channel> channel, const std::string& name,
                absl::Duration deadline);

  const std::string& address() const { return channel_.address(); }

  // Uploads dataset directory `dir` unless the coordinator has it. Returns its
  // content hash (meta.json's). NotFound/DataLoss when the directory is not a
  // prepared dataset.
  absl::StatusOr<std::string> EnsureDataset(const std::string& dir);

  // Reads the grid file at `path`, uploads its dataset if needed and submits
  // it. A malformed grid is reported before anything is sent. With
  // `budget_note`, sets it to BudgetChangeNote's text ("" when none).
  absl::StatusOr<v1::SubmitResponse> SubmitGridFile(const std::string& path, int retry_budget,
                                                    std::string* budget_note = nullptr);

  // What resubmitting `grid` changes when an experiment of its name has runs
  // at budgets the grid no longer asks for (another `budget:`): which, and
  // what becomes of them — queued anew at the new budget, the report
  // retargeted, the old runs kept but out of it. "" when nothing changes, the
  // experiment is new, or the latest submission that queued runs asked for
  // this grid's budget already (the note was given then).
  absl::StatusOr<std::string> BudgetChangeNote(const Grid& grid);

  // With `include_cancelled`, also the experiments whose every run was
  // cancelled (left out by default; the response counts them).
  absl::StatusOr<v1::ListExperimentsResponse> ListExperiments(bool include_cancelled = false);
  // `experiment` is a name or a numeric id.
  absl::StatusOr<v1::GetExperimentResponse> GetExperiment(const std::string& experiment);
  absl::StatusOr<v1::GetRunResponse> GetRun(int64_t run_id);
  absl::StatusOr<v1::CancelResponse> Cancel(const v1::CancelRequest& request);
  absl::StatusOr<v1::RetryResponse> Retry(const v1::RetryRequest& request);
  // `experiment` is a name or a numeric id; `force` deletes it even while
  // runs of it are leased.
  absl::StatusOr<v1::DeleteExperimentResponse> DeleteExperiment(const std::string& experiment,
                                                                bool force);
  absl::StatusOr<v1::ReportResponse> Report(v1::ReportRequest request,
                                            const std::string& experiment);
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest& request);
  // Writes a backup of the coordinator's database (the Backup rpc) to a new
  // file `path`: received into a temporary beside it, synced, checked for
  // length, then renamed into place. Returns its size in bytes.
  // AlreadyExists when `path` exists; the rpc's and the file system's errors
  // otherwise (nothing is left at `path` then). Its deadline is an hour.
  absl::StatusOr<int64_t> Backup(const std::string& path);
  // Streams a run's metrics until it ends (it follows the run: its deadline
  // is a day, not `deadline`).
  // `on_update` returning false stops the stream.
  absl::Status StreamMetrics(int64_t run_id,
                             const std::function<bool(const v1::StreamMetricsResponse&)>& on_update);

 private:
  template <typename Response, typename Request, typename Method>
  absl::StatusOr<Response> Call(Method method, const Request& request);

  // Declared before channel_, which the constructor reading the files
  // builds with what they held (or with no security when they failed).
  absl::Status setup_;  // why the credentials could not be read; OK when they were
  ClientChannel channel_;
  std::unique_ptr<v1::ClientService::Stub> stub_;
  absl::Duration deadline_;
  bool in_process_ = false;  // no network: errors are not explained as unreachability
};

// A report request from the command line's --at (steps, time, both),
// --format and --noise-floor; InvalidArgument naming the choices.
absl::StatusOr<v1::ReportRequest> MakeReportRequest(const std::string& at,
                                                   const std::string& format, double noise_floor);

// Adds the next command to try to an error talking to the coordinator:
// start one (for an address on this machine) or check the address.
absl::Status ExplainUnavailable(const absl::Status& status, const std::string& address);

// InvalidArgument unless `address` reads as HOST:PORT (or one of gRPC's
// target forms, such as unix:PATH): "--coordinator nohost" is a typo to
// name, not an address to dial. Every call of a ServiceClient built on such
// an address fails with this error.
absl::Status CheckCoordinatorAddress(const std::string& address);

}  // namespace smallem

#endif  // SMALLEM_CLI_SERVICE_CLIENT_H_
