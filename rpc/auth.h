// Who may call the coordinator, and over what: bearer tokens and TLS on its
// one port (docs/security.md).
//
//  * Tokens. With a worker token configured, every smallem.v1.WorkerService
//    call must carry `authorization: Bearer <worker token>`; with a client
//    token, every smallem.v1.ClientService call the client token. A call
//    without the right one fails UNAUTHENTICATED before any handler runs,
//    with a message naming the token expected (never the token). Tokens are
//    compared in constant time. A service without a token is open (the
//    default, for loopback); with any token configured, a service this file
//    does not know is refused, so a new service is never open by accident.
//  * TLS. With a certificate and key the port speaks TLS only; clients trust
//    the certificate through a root (CA) file.
//
// Clients attach their token per call (AttachToken): gRPC sends call
// credentials over TLS only, and a loopback coordinator is plaintext.
//
// Everything here is a plain function or value; thread-safe.
#ifndef SMALLEM_RPC_AUTH_H_
#define SMALLEM_RPC_AUTH_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class ChannelCredentials;
class ClientContext;
class ServerCredentials;
}  // namespace grpc

namespace smallem {

// The environment variables that stand in for the flags.
inline constexpr char kWorkerTokenEnv[] = "SMALLEM_WORKER_TOKEN";  // the token itself
inline constexpr char kClientTokenEnv[] = "SMALLEM_CLIENT_TOKEN";  // the token itself
inline constexpr char kTlsCaEnv[] = "SMALLEM_TLS_CA";              // a PEM file's path

// The coordinator's side.
struct ServerSecurity {
  std::string worker_token;  // required of WorkerService calls; "" = open
  std::string client_token;  // required of ClientService calls; "" = open
  std::string tls_cert_pem;  // certificate chain, PEM; "" = plaintext
  std::string tls_key_pem;   // its private key, PEM

  bool any_token() const { return !worker_token.empty() || !client_token.empty(); }
  bool tls() const { return !tls_cert_pem.empty(); }
};

// Where smallem-coordinator's flags point; "" = not given.
struct ServerSecurityFiles {
  std::string worker_token_file;  // else $SMALLEM_WORKER_TOKEN
  std::string client_token_file;  // else $SMALLEM_CLIENT_TOKEN
  std::string tls_cert_file;
  std::string tls_key_file;
};

// A client's side (worker or smallemctl).
struct ChannelSecurity {
  std::string token;       // sent as `authorization: Bearer <token>`; "" = none
  std::string tls_ca_pem;  // root the server's certificate must chain to; "" = plaintext
};

// Shortest token a file or the environment may hold.
inline constexpr size_t kMinTokenChars = 16;

// The token in the file at `path`, surrounding whitespace trimmed.
// NotFound when it cannot be read (not naming a path that names nothing,
// which may be the token itself); InvalidArgument when it is empty, shorter
// than kMinTokenChars or holds characters a gRPC header cannot carry.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The token from `file` when given, else from $`env_var` (trimmed; empty
// means unset), else "". Errors of ReadTokenFile.
absl::StatusOr<std::string> ResolveToken(const std::string& file, const char* env_var);

// The PEM text of `path` (`what` names it in errors: "TLS certificate").
// NotFound naming the file when unreadable; InvalidArgument when it is not
// PEM.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);

// The root certificate from `file` when given, else from the file
// $SMALLEM_TLS_CA names, else "" (plaintext). Errors of ReadPemFile.
absl::StatusOr<std::string> ResolveTlsCa(const std::string& file);

// Reads what `files` names (tokens falling back to the environment).
// InvalidArgument when only one of certificate and key is given.
absl::StatusOr<ServerSecurity> LoadServerSecurity(const ServerSecurityFiles& files);

// The check itself: OK when the call to `method_path`
// ("/smallem.v1.ClientService/Submit") may proceed with the `authorization`
// header value (empty when absent); UNAUTHENTICATED otherwise.
absl::Status CheckBearerToken(const ServerSecurity& security, std::string_view method_path,
                              std::string_view authorization);

// Equal strings, in time that depends on neither's content.
bool TokensEqual(std::string_view a, std::string_view b);

// Credentials for ServerBuilder::AddListeningPort: plaintext or TLS, with
// CheckBearerToken on every call when a token is configured.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);

// Plaintext or TLS channel credentials.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const ChannelSecurity& security);

// Adds `authorization: Bearer <token>` to one call; nothing when token is "".
void AttachToken(const std::string& token, grpc::ClientContext* context);

// True when `listen` (host:port) binds a loopback address only
// ("127.0.0.1:7070", "localhost:0", "[::1]:7070"); false for "0.0.0.0:7070",
// ":7070" and every other host.
bool IsLoopbackListen(const std::string& listen);

}  // namespace smallem

#endif  // SMALLEM_RPC_AUTH_H_
