#include "rpc/auth.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <span>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "rpc/grpc_status.h"
#include "smallem/v1/client.grpc.pb.h"
#include "smallem/v1/worker.grpc.pb.h"

namespace smallem {
namespace {

// ReadFile's result, its message saying what the file was for.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(what, ": ", text.status().message()));
  }
  return text;
}

// gRPC refuses header values outside printable ASCII; a space inside a
// token is more likely a pasted sentence than a token.
bool IsTokenText(std::string_view token) {
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

// Which token guards a service, and how a caller supplies it.
struct Guard {
  const std::string* token = nullptr;
  const char* name = "";  // "worker token"
  const char* how = "";   // where the caller's token comes from
};

absl::Status Unauthenticated(std::string_view service, const Guard& guard,
                             std::string_view problem) {
  return absl::UnauthenticatedError(absl::StrCat(
      std::string(service), " requires the ", guard.name, " (authorization: Bearer <",
      guard.name, ">): ", std::string(problem), "; ", guard.how));
}

// The metadata a processor sees includes the pseudo-header ":path".
template <typename Metadata, typename KeyOf, typename ValueOf>
void FindPathAndAuthorization(const Metadata& md, KeyOf key_of, ValueOf value_of,
                              std::string_view* path, std::string_view* authorization) {
  for (const auto& entry : md) {
    const std::string_view key = key_of(entry);
    if (key == ":path") *path = value_of(entry);
    if (key == "authorization" && authorization->empty()) *authorization = value_of(entry);
  }
}

std::string_view SliceView(const grpc_slice& s) {
  return std::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)),
                          GRPC_SLICE_LENGTH(s));
}

// The check behind TLS ports, through gRPC's C++ processor interface.
class BearerTokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenProcessor(ServerSecurity security) : security_(std::move(security)) {}

  // A hash and a compare: run it inline, not on gRPC's thread pool.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& md, grpc::AuthContext* /*context*/,
                       OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) override {
    std::string_view path, authorization;
    auto view = [](const grpc::string_ref& s) { return std::string_view(s.data(), s.size()); };
    FindPathAndAuthorization(
        md, [&](const auto& e) { return view(e.first); },
        [&](const auto& e) { return view(e.second); }, &path, &authorization);
    return ToGrpcStatus(CheckBearerToken(security_, path, authorization));
  }

 private:
  const ServerSecurity security_;
};

// The check behind plaintext ports. gRPC 1.51's InsecureServerCredentials
// asserts in SetAuthMetadataProcessor, yet its core runs a processor set on
// plaintext credentials like any other (before the handler, failing the call
// with the processor's status). These credentials do that through the C API.
class PlaintextWithTokenCheck final : public grpc::ServerCredentials {
 public:
  explicit PlaintextWithTokenCheck(ServerSecurity security) : security_(std::move(security)) {}

  // The check is built in; nothing else may replace it.
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {}

 private:
  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                      size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
    std::string_view path, authorization;
    FindPathAndAuthorization(
        std::span<const grpc_metadata>(md, num_md),
        [](const grpc_metadata& m) { return SliceView(m.key); },
        [](const grpc_metadata& m) { return SliceView(m.value); }, &path, &authorization);
    const grpc::Status status = ToGrpcStatus(
        CheckBearerToken(*static_cast<const ServerSecurity*>(state), path, authorization));
    // gRPC copies the message before `done` returns.
    done(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(status.error_code()),
         status.ok() ? nullptr : status.error_message().c_str());
  }

  // grpc::Server (a friend of ServerCredentials) binds the port through this.
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    grpc_server_credentials* creds = grpc_insecure_server_credentials_create();
    // The C credentials own their copy of the tokens; gRPC destroys it with them.
    grpc_auth_metadata_processor processor{
        &Process, [](void* state) { delete static_cast<ServerSecurity*>(state); },
        new ServerSecurity(security_)};
    grpc_server_credentials_set_auth_metadata_processor(creds, processor);
    const int port = grpc_server_add_http2_port(server, addr.c_str(), creds);
    grpc_server_credentials_release(creds);
    return port;
  }

  const ServerSecurity security_;
};

}  // namespace

namespace {

// A guessable token is no protection: 16 characters of `openssl rand -hex`
// are 64 bits.
absl::Status CheckTokenLength(const std::string& token, const std::string& where) {
  if (token.size() >= kMinTokenChars) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      where, " holds a token of ", token.size(), " characters; a token has at least ",
      kMinTokenChars, " (make one with `openssl rand -hex 32`)"));
}

}  // namespace

// Why a token file's path is not shown when it names nothing: it may be the
// token itself, pasted where the path belongs.
constexpr char kNoSuchTokenFile[] =
    "no such file (the value is not shown, in case it is the token itself; give the path of a "
    "file holding the token)";

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  // A token pasted where its file's path belongs must not reach a terminal
  // or a log: a path that names nothing is never echoed.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("token file: ", kNoSuchTokenFile));
  }
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "token file"));
  const std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file ", path, " is empty; put a token in it, e.g. `openssl rand -hex 32 > ", path,
        "`"));
  }
  if (!IsTokenText(token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file ", path, " holds spaces or non-ASCII characters; a token is one word of "
        "printable ASCII"));
  }
  RETURN_IF_ERROR(CheckTokenLength(token, absl::StrCat("token file ", path)));
  return token;
}

absl::StatusOr<std::string> ResolveToken(const std::string& file, const char* env_var) {
  if (!file.empty()) return ReadTokenFile(file);
  const char* env = std::getenv(env_var);
  const std::string token(absl::StripAsciiWhitespace(env != nullptr ? env : ""));
  if (!IsTokenText(token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "$", env_var, " holds spaces or non-ASCII characters; a token is one word of "
        "printable ASCII"));
  }
  if (!token.empty()) RETURN_IF_ERROR(CheckTokenLength(token, absl::StrCat("$", env_var)));
  return token;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  ASSIGN_OR_RETURN(std::string pem, ReadWholeFile(path, what));
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is not PEM (no -----BEGIN line)"));
  }
  return pem;
}

absl::StatusOr<std::string> ResolveTlsCa(const std::string& file) {
  if (!file.empty()) return ReadPemFile(file, "TLS root certificate");
  const char* env = std::getenv(kTlsCaEnv);
  if (env == nullptr || *env == '\0') return std::string();
  return ReadPemFile(env, absl::StrCat("TLS root certificate ($", kTlsCaEnv, ")"));
}

absl::StatusOr<ServerSecurity> LoadServerSecurity(const ServerSecurityFiles& files) {
  ServerSecurity security;
  ASSIGN_OR_RETURN(security.worker_token, ResolveToken(files.worker_token_file, kWorkerTokenEnv));
  ASSIGN_OR_RETURN(security.client_token, ResolveToken(files.client_token_file, kClientTokenEnv));
  if (files.tls_cert_file.empty() != files.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert FILE and --tls-key FILE");
  }
  if (!files.tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(security.tls_cert_pem, ReadPemFile(files.tls_cert_file, "TLS certificate"));
    ASSIGN_OR_RETURN(security.tls_key_pem, ReadPemFile(files.tls_key_file, "TLS key"));
  }
  return security;
}

bool TokensEqual(std::string_view a, std::string_view b) {
  // Comparing digests hides the lengths too; the loop never exits early.
  Sha256 ha, hb;
  ha.Update(a);
  hb.Update(b);
  const Sha256::Digest da = ha.Finish(), db = hb.Finish();
  unsigned char diff = 0;
  for (size_t i = 0; i < da.size(); ++i) diff |= da[i] ^ db[i];
  return diff == 0;
}

absl::Status CheckBearerToken(const ServerSecurity& security, std::string_view method_path,
                              std::string_view authorization) {
  // ":path" is "/<package>.<Service>/<Method>".
  const size_t slash = method_path.find('/', 1);
  const std::string_view service =
      method_path.substr(1, slash == std::string_view::npos ? 0 : slash - 1);
  Guard guard;
  if (service == v1::WorkerService::service_full_name()) {
    guard = {&security.worker_token, "worker token",
             "give smallem-worker --token-file FILE or set $SMALLEM_WORKER_TOKEN"};
  } else if (service == v1::ClientService::service_full_name()) {
    guard = {&security.client_token, "client token",
             "give smallemctl --token-file FILE or set $SMALLEM_CLIENT_TOKEN"};
  } else if (security.any_token()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "no token opens ", std::string(method_path), "; this coordinator serves ",
        v1::ClientService::service_full_name(), " and ", v1::WorkerService::service_full_name()));
  } else {
    return absl::OkStatus();
  }
  if (guard.token->empty()) return absl::OkStatus();
  if (authorization.empty()) return Unauthenticated(service, guard, "none was sent");
  // The scheme is case-insensitive (RFC 7235); the token is not.
  constexpr std::string_view kBearer = "bearer ";
  if (authorization.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(std::string(authorization.substr(0, kBearer.size())),
                              std::string(kBearer))) {
    return Unauthenticated(service, guard, "the authorization header is not a bearer token");
  }
  if (!TokensEqual(authorization.substr(kBearer.size()), *guard.token)) {
    return Unauthenticated(service, guard, "the token sent is not it");
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security) {
  if (security.tls()) {
    grpc::SslServerCredentialsOptions options;  // no client certificates asked for
    options.pem_key_cert_pairs.push_back({security.tls_key_pem, security.tls_cert_pem});
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::SslServerCredentials(options);
    if (security.any_token()) {
      creds->SetAuthMetadataProcessor(std::make_shared<BearerTokenProcessor>(security));
    }
    return creds;
  }
  if (security.any_token()) return std::make_shared<PlaintextWithTokenCheck>(security);
  return grpc::InsecureServerCredentials();
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const ChannelSecurity& security) {
  if (security.tls_ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.tls_ca_pem;
  return grpc::SslCredentials(options);
}

void AttachToken(const std::string& token, grpc::ClientContext* context) {
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

bool IsLoopbackListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon == std::string::npos ? listen.size() : colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace smallem
