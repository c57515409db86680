#include "cli/service_client.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/files.h"
#include "base/text.h"
#include "base/status_macros.h"
#include "corpus/dataset_format.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "rpc/grpc_status.h"
#include "rpc/limits.h"
#include "runspec/grid.h"

namespace smallem {
namespace {

// The line (from 1) where `key:` starts a line of a YAML text's top level;
// 1 when none does (the parser accepted the file, so it is there in some
// other form, such as a flow mapping).
int TopLevelKeyLine(const std::string& yaml, const std::string& key) {
  int line = 1;
  for (absl::string_view text : absl::StrSplit(yaml, '\n')) {
    if (absl::StartsWith(text, key + ":")) return line;
    ++line;
  }
  return 1;
}

// The client token from `token_file` (else the environment) and the TLS
// root from `tls_ca_file` (else the environment). When either cannot be
// read, `error` says why and the result is plaintext without a token: the
// constructor cannot fail, so the first call reports the error.
ChannelSecurity ResolveClientSecurity(const std::string& token_file,
                                      const std::string& tls_ca_file, absl::Status* error) {
  absl::StatusOr<std::string> token = ResolveToken(token_file, kClientTokenEnv);
  absl::StatusOr<std::string> ca = ResolveTlsCa(tls_ca_file);
  if (!token.ok()) *error = token.status();
  else if (!ca.ok()) *error = ca.status();
  else return {.token = *token, .tls_ca_pem = *ca};
  return {};
}

}  // namespace

absl::StatusOr<v1::ReportRequest> MakeReportRequest(const std::string& at,
                                                   const std::string& format,
                                                   double noise_floor) {
  v1::ReportRequest request;
  if (at == "steps") request.set_at(v1::REPORT_AT_STEPS);
  else if (at == "time") request.set_at(v1::REPORT_AT_TIME);
  else if (at == "both") request.set_at(v1::REPORT_AT_BOTH);
  else {
    return absl::InvalidArgumentError(absl::StrCat("--at ", at, ": expected steps, time or both"));
  }
  if (format == "table") request.set_format(v1::REPORT_FORMAT_TABLE);
  else if (format == "markdown") request.set_format(v1::REPORT_FORMAT_MARKDOWN);
  else if (format == "csv") request.set_format(v1::REPORT_FORMAT_CSV);
  else if (format == "json") request.set_format(v1::REPORT_FORMAT_JSON);
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("--format ", format, ": expected table, markdown, csv or json"));
  }
  if (noise_floor < 0) return absl::InvalidArgumentError("--noise-floor: must not be negative");
  request.set_noise_floor(noise_floor);
  return request;
}

std::string DefaultCoordinatorAddress() {
  const char* env = std::getenv("SMALLEM_COORDINATOR");
  return env != nullptr && *env != '\0' ? env : "127.0.0.1:7070";
}

absl::Status CheckCoordinatorAddress(const std::string& address) {
  // A URL (copied from the dashboard's address bar, say) is not a gRPC
  // target: gRPC would look the whole of it up as a host name.
  for (const char* scheme : {"http://", "https://"}) {
    if (!absl::StartsWithIgnoreCase(address, scheme)) continue;
    const std::string rest = address.substr(std::strlen(scheme));
    return absl::InvalidArgumentError(absl::StrCat(
        "--coordinator ", SanitizeLine(address, 200), ": drop the ", scheme,
        " and give HOST:PORT, the coordinator's gRPC address (e.g. --coordinator ",
        SanitizeLine(rest.substr(0, rest.find('/')), 200), ")",
        scheme == std::string("https://") ? "; a TLS coordinator takes --tls-ca FILE" : ""));
  }
  // gRPC's own target forms (dns:///…, unix:…, ipv4:…) pass as they are.
  if (address.find("://") != std::string::npos || address.rfind("unix:", 0) == 0 ||
      address.rfind("ipv4:", 0) == 0 || address.rfind("ipv6:", 0) == 0) {
    return absl::OkStatus();
  }
  const size_t colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  int number = 0;
  if (colon == 0 || colon == std::string::npos || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--coordinator ", SanitizeLine(address, 200),
        ": expected HOST:PORT, the address the coordinator listens on (e.g. 127.0.0.1:7070)"));
  }
  return absl::OkStatus();
}

absl::Status ExplainUnavailable(const absl::Status& status, const std::string& address) {
  const absl::string_view message = status.message();
  // Something answered, but not in gRPC: a web server speaking HTTP/1 —
  // the dashboard's port, most likely — is not the coordinator's port.
  if (absl::StrContains(message, "http1.x server")) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach the coordinator at ", address, ": that is an HTTP/1 port (the "
        "dashboard's, `smallem-coordinator --http`?), not the coordinator's gRPC port; give "
        "--coordinator the address its log names after \"listening on\" (its --listen)"));
  }
  // An HTTP/2 server that is not a gRPC one (a proxy on the way, another
  // service on that port) answered with an HTTP status: the coordinator
  // was not reached, whatever gRPC code that status maps to.
  const bool other_server = absl::StrContains(message, "Received http2 header with status");
  if (status.code() != absl::StatusCode::kUnavailable &&
      status.code() != absl::StatusCode::kDeadlineExceeded && !other_server) {
    return status;
  }
  const std::string host = address.substr(0, address.rfind(':'));
  const bool here = host == "127.0.0.1" || host == "localhost" || host == "[::1]" ||
                    host == "0.0.0.0";
  // Starting a coordinator is advice for this machine only; its flag is the
  // coordinator's, so the command is given whole.
  return absl::Status(
      other_server ? absl::StatusCode::kUnavailable : status.code(),
      absl::StrCat("cannot reach the coordinator at ", address, " (",
                   other_server ? "another server or a proxy answered there: " : "",
                   status.message(), "); ",
                   here ? absl::StrCat("start one with `smallem-coordinator --listen ", address,
                                       "`, ")
                        : "is it running there, and listening on that port? ",
                   "point at another with --coordinator HOST:PORT, or run everything here with "
                   "`smallemctl run GRID`"));
}

ServiceClient::ServiceClient(const std::string& address, absl::Duration deadline,
                             const std::string& token_file, const std::string& tls_ca_file)
    : channel_(address, {.security = ResolveClientSecurity(token_file, tls_ca_file, &setup_)}),
      stub_(v1::ClientService::NewStub(channel_.channel())),
      deadline_(deadline) {
  if (setup_.ok()) setup_ = CheckCoordinatorAddress(address);
}

ServiceClient::ServiceClient(const std::string& address, absl::Duration deadline,
                             const ChannelSecurity& security)
    : channel_(address, {.security = security}),
      stub_(v1::ClientService::NewStub(channel_.channel())),
      deadline_(deadline) {}

ServiceClient::ServiceClient(std::shared_ptr<grpc::Channel> channel, const std::string& name,
                             absl::Duration deadline)
    : channel_(std::move(channel), name),
      stub_(v1::ClientService::NewStub(channel_.channel())),
      deadline_(deadline),
      in_process_(true) {}

template <typename Response, typename Request, typename Method>
absl::StatusOr<Response> ServiceClient::Call(Method method, const Request& request) {
  if (!setup_.ok()) return setup_;
  auto context = channel_.NewCallContext(deadline_);
  Response response;
  grpc::Status status = ((*stub_).*method)(context.get(), request, &response);
  if (!status.ok()) {
    return in_process_ ? FromGrpcStatus(status)
                       : ExplainUnavailable(FromGrpcStatus(status), address());
  }
  return response;
}

absl::StatusOr<std::string> ServiceClient::EnsureDataset(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string meta_text, ReadFile(dir + "/meta.json"));
  nlohmann::json meta = nlohmann::json::parse(meta_text, nullptr, false);
  const std::string hash = meta.is_object() ? meta.value("content_hash", "") : "";
  if (hash.empty()) {
    return absl::DataLossError(absl::StrCat(dir, "/meta.json has no content_hash; prepare the "
                                            "dataset again with `smallemctl data prepare`"));
  }
  {
    v1::HasDatasetRequest request;
    request.set_content_hash(hash);
    absl::StatusOr<v1::HasDatasetResponse> has =
        Call<v1::HasDatasetResponse>(&v1::ClientService::Stub::HasDataset, request);
    if (!has.ok()) return has.status();
    if (has->present()) return hash;
  }
  // Uploads are allowed longer: a large corpus over a slow link.
  auto context = channel_.NewCallContext(deadline_ * 20);
  v1::UploadDatasetResponse response;
  auto writer = stub_->UploadDataset(context.get(), &response);
  for (const char* name : kDatasetFiles) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(absl::StrCat(dir, "/", name)));
    for (size_t offset = 0; offset == 0 || offset < bytes.size(); offset += kDatasetChunkBytes) {
      v1::DatasetChunk chunk;
      chunk.set_content_hash(hash);
      chunk.set_file_name(name);
      chunk.set_file_size(static_cast<int64_t>(bytes.size()));
      chunk.set_offset(static_cast<int64_t>(offset));
      chunk.set_data(bytes.substr(offset, kDatasetChunkBytes));
      if (!writer->Write(chunk)) break;  // Finish says why
      if (bytes.empty()) break;
    }
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return ExplainUnavailable(FromGrpcStatus(status), address());
  return hash;
}

absl::StatusOr<std::string> ServiceClient::BudgetChangeNote(const Grid& grid) {
  absl::StatusOr<v1::GetExperimentResponse> before = GetExperiment(grid.name);
  if (absl::IsNotFound(before.status())) return std::string();
  if (!before.ok()) return before.status();
  std::set<std::string> wanted = {BudgetKey(grid.budget)};
  if (grid.reference) {
    for (const Budget& b : grid.reference->budgets) wanted.insert(BudgetKey(b));
  }
  std::map<std::string, int> left;  // budget → runs this grid no longer asks for
  for (const v1::Run& run : before->runs()) {
    if (!wanted.count(run.budget())) ++left[run.budget()];
  }
  if (left.empty()) return std::string();
  // Said once, when the budget changes: not again on every later submission
  // of the same grid. The latest submission that queued anything is the one
  // whose runs were created last (one submission's runs share a time); when
  // it asked for this budget, this grid changes nothing the note would tell.
  int64_t latest_ms = 0;
  for (const v1::Run& run : before->runs()) latest_ms = std::max(latest_ms, run.created_unix_ms());
  for (const v1::Run& run : before->runs()) {
    if (run.created_unix_ms() == latest_ms && run.budget() == BudgetKey(grid.budget)) {
      return std::string();
    }
  }
  std::vector<std::string> parts;
  int runs = 0;
  for (const auto& [budget, count] : left) {
    parts.push_back(absl::StrCat(count, count == 1 ? " run" : " runs", " at ", budget));
    runs += count;
  }
  const std::string now = BudgetKey(grid.budget);
  return absl::StrCat(
      "note: experiment \"", grid.name, "\" was submitted before with another budget (",
      absl::StrJoin(parts, ", "), "); this grid's budget is ", now,
      ". Its runs at ", now, " are queued, the report now compares at ", now, ", and the ", runs,
      " earlier run", runs == 1 ? "" : "s",
      " stay in the database (`smallemctl status ", grid.name,
      "` lists them) but leave the report. To keep both comparisons, give this grid another name.");
}

absl::StatusOr<v1::SubmitResponse> ServiceClient::SubmitGridFile(const std::string& path,
                                                                 int retry_budget,
                                                                 std::string* budget_note) {
  ASSIGN_OR_RETURN(std::string yaml, ReadFile(path));
  // Parsed here first: a malformed grid is reported before any upload, and
  // the dataset directory is the grid's.
  ASSIGN_OR_RETURN(Grid grid, ParseGrid(yaml, path));
  if (!std::filesystem::exists(grid.data_dir + "/meta.json")) {
    // Like every other grid error: the file, the line and the key.
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", TopLevelKeyLine(yaml, "data"), ": \"data\": ", grid.data_dir,
        " is not a prepared dataset (it has no meta.json); make it with `smallemctl data "
        "prepare --out ", grid.data_dir, "`, or fix the path (relative to the grid file's "
        "directory)"));
  }
  if (budget_note != nullptr) {
    ASSIGN_OR_RETURN(*budget_note, BudgetChangeNote(grid));
  }
  ASSIGN_OR_RETURN(std::string hash, EnsureDataset(grid.data_dir));
  v1::SubmitRequest request;
  request.set_grid_yaml(yaml);
  request.set_grid_file_name(path);
  request.set_retry_budget(retry_budget);
  (*request.mutable_dataset_hashes())[grid.data_dir] = hash;
  return Call<v1::SubmitResponse>(&v1::ClientService::Stub::Submit, request);
}

absl::StatusOr<v1::ListExperimentsResponse> ServiceClient::ListExperiments(
    bool include_cancelled) {
  v1::ListExperimentsRequest request;
  request.set_include_cancelled(include_cancelled);
  return Call<v1::ListExperimentsResponse>(&v1::ClientService::Stub::ListExperiments, request);
}

absl::StatusOr<v1::GetExperimentResponse> ServiceClient::GetExperiment(
    const std::string& experiment) {
  v1::GetExperimentRequest request;
  int64_t id = 0;
  if (absl::SimpleAtoi(experiment, &id)) request.set_experiment_id(id);
  else request.set_name(experiment);
  return Call<v1::GetExperimentResponse>(&v1::ClientService::Stub::GetExperiment, request);
}

absl::StatusOr<v1::GetRunResponse> ServiceClient::GetRun(int64_t run_id) {
  v1::GetRunRequest request;
  request.set_run_id(run_id);
  return Call<v1::GetRunResponse>(&v1::ClientService::Stub::GetRun, request);
}

absl::StatusOr<v1::CancelResponse> ServiceClient::Cancel(const v1::CancelRequest& request) {
  return Call<v1::CancelResponse>(&v1::ClientService::Stub::Cancel, request);
}

absl::StatusOr<v1::RetryResponse> ServiceClient::Retry(const v1::RetryRequest& request) {
  return Call<v1::RetryResponse>(&v1::ClientService::Stub::Retry, request);
}

absl::StatusOr<v1::DeleteExperimentResponse> ServiceClient::DeleteExperiment(
    const std::string& experiment, bool force) {
  v1::DeleteExperimentRequest request;
  int64_t id = 0;
  if (absl::SimpleAtoi(experiment, &id)) request.set_experiment_id(id);
  else request.set_name(experiment);
  request.set_force(force);
  return Call<v1::DeleteExperimentResponse>(&v1::ClientService::Stub::DeleteExperiment, request);
}

absl::StatusOr<v1::ReportResponse> ServiceClient::Report(v1::ReportRequest request,
                                                         const std::string& experiment) {
  int64_t id = 0;
  if (absl::SimpleAtoi(experiment, &id)) request.set_experiment_id(id);
  else request.set_name(experiment);
  return Call<v1::ReportResponse>(&v1::ClientService::Stub::Report, request);
}

absl::StatusOr<v1::ListWorkersResponse> ServiceClient::ListWorkers(
    const v1::ListWorkersRequest& request) {
  return Call<v1::ListWorkersResponse>(&v1::ClientService::Stub::ListWorkers, request);
}

absl::StatusOr<int64_t> ServiceClient::Backup(const std::string& path) {
  if (!setup_.ok()) return setup_;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    return absl::AlreadyExistsError(absl::StrCat(path, " exists; name a new file"));
  }
  const std::string partial = absl::StrCat(path, ".partial-", getpid());
  std::filesystem::remove(partial, ec);
  // The copy holds the whole database: owner-only before its first byte.
  RETURN_IF_ERROR(WriteFileChunk(partial, 0, ""));
  std::filesystem::permissions(
      partial, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
      std::filesystem::perm_options::replace, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    return absl::PermissionDeniedError(absl::StrCat("cannot make ", partial, " owner-only"));
  }
  auto context = channel_.NewCallContext(absl::Hours(1));
  auto reader = stub_->Backup(context.get(), v1::BackupRequest());
  v1::BackupChunk chunk;
  int64_t received = 0, total = -1;
  absl::Status written = absl::OkStatus();
  while (written.ok() && reader->Read(&chunk)) {
    total = chunk.total_bytes();
    written = WriteFileChunk(partial, chunk.offset(), chunk.data());
    received += static_cast<int64_t>(chunk.data().size());
  }
  if (!written.ok()) context->TryCancel();
  absl::Status status = ExplainUnavailable(FromGrpcStatus(reader->Finish()), address());
  if (status.ok()) status = written;
  if (status.ok() && (total < 0 || received != total)) {
    status = absl::DataLossError(absl::StrCat("the backup stream ended after ", received,
                                              " of ", total, " bytes; run it again"));
  }
  if (status.ok()) status = SyncToDisk(partial);
  if (status.ok()) status = RenameDurably(partial, path);
  if (!status.ok()) {
    std::filesystem::remove(partial, ec);
    return status;
  }
  return received;
}

absl::Status ServiceClient::StreamMetrics(
    int64_t run_id, const std::function<bool(const v1::StreamMetricsResponse&)>& on_update) {
  if (!setup_.ok()) return setup_;
  // It follows the run as long as it lasts; a day bounds a forgotten watch.
  auto context = channel_.NewCallContext(absl::Hours(24));
  v1::StreamMetricsRequest request;
  request.set_run_id(run_id);
  request.set_after_step(-1);
  request.set_follow(true);
  auto reader = stub_->StreamMetrics(context.get(), request);
  v1::StreamMetricsResponse response;
  while (reader->Read(&response)) {
    if (!on_update(response)) {
      context->TryCancel();
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::CANCELLED) return absl::OkStatus();
  if (in_process_) return FromGrpcStatus(status);
  return ExplainUnavailable(FromGrpcStatus(status), address());
}

}  // namespace smallem
