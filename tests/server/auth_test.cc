// Tokens and TLS on a real Coordinator (127.0.0.1 port 0, a real SQLite
// file), called through the generated stubs with and without the
// authorization header.
#include "rpc/auth.h"

#include <cstdlib>
#include <memory>

#include "gtest/gtest.h"
#include "server/service/coordinator.h"
#include "smallem/v1/worker.grpc.pb.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::Context;
using testing::MakeGridYaml;
using testing::TempDir;
using testing::WriteFakeDataset;
using testing::WriteFile;

constexpr char kWorkerToken[] = "worker-7f3a9c";
constexpr char kClientToken[] = "client-41be02";

std::unique_ptr<grpc::ClientContext> ContextWithToken(const std::string& token) {
  auto context = Context();
  AttachToken(token, context.get());
  return context;
}

class AuthTest : public ::testing::Test {
 protected:
  void Start(ServerSecurity security, const ChannelSecurity& channel = {}) {
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = dir_.Join("smallem.db");
    options.reaper = false;
    options.security = std::move(security);
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
    auto ch = grpc::CreateChannel(coordinator_->address(), MakeChannelCredentials(channel));
    client_ = v1::ClientService::NewStub(ch);
    worker_ = v1::WorkerService::NewStub(ch);
  }

  void StartWithBothTokens() {
    Start({.worker_token = kWorkerToken, .client_token = kClientToken});
  }

  grpc::Status ListExperiments(const std::string& token) {
    v1::ListExperimentsResponse response;
    return client_->ListExperiments(ContextWithToken(token).get(), {}, &response);
  }

  grpc::Status Register(const std::string& token) {
    v1::RegisterResponse response;
    return worker_->Register(ContextWithToken(token).get(), testing::CpuRegistration(),
                             &response);
  }

  TempDir dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<v1::ClientService::Stub> client_;
  std::unique_ptr<v1::WorkerService::Stub> worker_;
};

// The message says which token is expected and never repeats one.
void ExpectUnauthenticated(const grpc::Status& status, const std::string& expected_token_name) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_NE(status.error_message().find(expected_token_name), std::string::npos)
      << status.error_message();
  EXPECT_EQ(status.error_message().find(kWorkerToken), std::string::npos);
  EXPECT_EQ(status.error_message().find(kClientToken), std::string::npos);
}

TEST_F(AuthTest, ClientCallWithoutTokenIsUnauthenticated) {
  StartWithBothTokens();
  grpc::Status status = ListExperiments("");
  ExpectUnauthenticated(status, "client token");
  EXPECT_NE(status.error_message().find("none was sent"), std::string::npos);
}

TEST_F(AuthTest, ClientCallWithWorkerTokenIsUnauthenticated) {
  StartWithBothTokens();
  ExpectUnauthenticated(ListExperiments(kWorkerToken), "client token");
}

TEST_F(AuthTest, ClientCallWithClientTokenSucceeds) {
  StartWithBothTokens();
  grpc::Status status = ListExperiments(kClientToken);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(AuthTest, WorkerCallWithWorkerTokenSucceeds) {
  StartWithBothTokens();
  grpc::Status status = Register(kWorkerToken);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(AuthTest, WorkerCallWithClientTokenIsUnauthenticated) {
  StartWithBothTokens();
  ExpectUnauthenticated(Register(kClientToken), "worker token");
  ExpectUnauthenticated(Register(""), "worker token");
}

TEST_F(AuthTest, StreamingCallsAreCheckedToo) {
  StartWithBothTokens();
  const std::string data = dir_.Join("data");
  const std::string hash = WriteFakeDataset(data);
  {
    auto context = ContextWithToken(kWorkerToken);
    v1::UploadDatasetResponse response;
    auto writer = client_->UploadDataset(context.get(), &response);
    writer->WritesDone();
    ExpectUnauthenticated(writer->Finish(), "client token");
  }
  // Refused before the handler looks for the dataset.
  auto context = ContextWithToken(kClientToken);
  v1::FetchDatasetRequest request;
  request.set_content_hash(hash);
  auto reader = worker_->FetchDataset(context.get(), request);
  v1::DatasetChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  ExpectUnauthenticated(reader->Finish(), "worker token");
}

TEST_F(AuthTest, RejectedCallNeverReachesItsHandler) {
  StartWithBothTokens();
  v1::SubmitRequest request;
  request.set_grid_yaml(MakeGridYaml("exp", dir_.Join("data"), 1, 1));
  request.set_grid_file_name("grid.yaml");
  v1::SubmitResponse response;
  ExpectUnauthenticated(client_->Submit(ContextWithToken("").get(), request, &response),
                        "client token");
  v1::ListExperimentsResponse list;
  ASSERT_TRUE(client_->ListExperiments(ContextWithToken(kClientToken).get(), {}, &list).ok());
  EXPECT_EQ(list.experiments_size(), 0);
}

TEST_F(AuthTest, WithoutTokensEveryServiceIsOpen) {
  Start({});
  EXPECT_TRUE(ListExperiments("").ok());
  EXPECT_TRUE(Register("").ok());
  EXPECT_TRUE(ListExperiments("anything").ok());  // a token sent to an open service is ignored
}

TEST_F(AuthTest, EachTokenGuardsOnlyItsService) {
  Start({.worker_token = kWorkerToken});
  EXPECT_TRUE(ListExperiments("").ok());
  ExpectUnauthenticated(Register(""), "worker token");
  EXPECT_TRUE(Register(kWorkerToken).ok());
}

TEST(CheckBearerTokenTest, SchemeIsCaseInsensitiveAndTokenIsNot) {
  const ServerSecurity security{.client_token = "Tok"};
  const char* kPath = "/smallem.v1.ClientService/ListExperiments";
  EXPECT_TRUE(CheckBearerToken(security, kPath, "Bearer Tok").ok());
  EXPECT_TRUE(CheckBearerToken(security, kPath, "bearer Tok").ok());
  EXPECT_EQ(CheckBearerToken(security, kPath, "Bearer tok").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerToken(security, kPath, "Basic Tok").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerToken(security, kPath, "Bearer ").code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(CheckBearerTokenTest, UnknownServiceIsRefusedOnceAnyTokenIsSet) {
  const char* kPath = "/grpc.health.v1.Health/Check";
  EXPECT_TRUE(CheckBearerToken(ServerSecurity{}, kPath, "").ok());
  EXPECT_EQ(CheckBearerToken(ServerSecurity{.worker_token = "w"}, kPath, "Bearer w").code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(TokensEqualTest, EqualOnlyWhenIdentical) {
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
  EXPECT_FALSE(TokensEqual("abc", "abcd"));
  EXPECT_FALSE(TokensEqual("", "a"));
}

TEST(IsLoopbackListenTest, OnlyLoopbackHostsCount) {
  EXPECT_TRUE(IsLoopbackListen("127.0.0.1:7070"));
  EXPECT_TRUE(IsLoopbackListen("localhost:0"));
  EXPECT_TRUE(IsLoopbackListen("[::1]:7070"));
  EXPECT_FALSE(IsLoopbackListen("0.0.0.0:7070"));
  EXPECT_FALSE(IsLoopbackListen("[::]:7070"));
  EXPECT_FALSE(IsLoopbackListen(":7070"));
  EXPECT_FALSE(IsLoopbackListen("10.1.2.3:7070"));
}

TEST(ReadTokenFileTest, TokenIsTrimmed) {
  TempDir dir;
  WriteFile(dir.Join("token"), "  s3cret-token-0123\n\n");
  absl::StatusOr<std::string> token = ReadTokenFile(dir.Join("token"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret-token-0123");
}

TEST(ReadTokenFileTest, AShortTokenIsRefused) {
  TempDir dir;
  WriteFile(dir.Join("token"), "x\n");
  absl::StatusOr<std::string> token = ReadTokenFile(dir.Join("token"));
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find("at least 16"), std::string::npos) << token.status();
  EXPECT_NE(token.status().message().find(dir.Join("token")), std::string::npos);
}

TEST(ReadTokenFileTest, EmptyFileIsAnErrorNamingIt) {
  TempDir dir;
  WriteFile(dir.Join("token"), " \n");
  absl::StatusOr<std::string> token = ReadTokenFile(dir.Join("token"));
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(token.status().message().find(dir.Join("token")), std::string::npos);
}

// The "path" may be the token itself, pasted where the path belongs: the
// error says what to give and never repeats it.
TEST(ReadTokenFileTest, AMissingFileIsRefusedWithoutEchoingTheValue) {
  absl::StatusOr<std::string> token = ReadTokenFile("12EQtzUVpasted-token-0123456789");
  EXPECT_EQ(token.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(token.status().message().find("12EQtzUV"), std::string::npos) << token.status();
  EXPECT_NE(token.status().message().find("no such file"), std::string::npos) << token.status();
  EXPECT_NE(token.status().message().find("a file holding the token"), std::string::npos)
      << token.status();
}

TEST(ResolveTokenTest, FileWinsOverEnvironment) {
  TempDir dir;
  WriteFile(dir.Join("token"), "from-file-0123456\n");
  setenv("SMALLEM_AUTH_TEST_TOKEN", " from-env-01234567 ", 1);
  EXPECT_EQ(*ResolveToken(dir.Join("token"), "SMALLEM_AUTH_TEST_TOKEN"), "from-file-0123456");
  EXPECT_EQ(*ResolveToken("", "SMALLEM_AUTH_TEST_TOKEN"), "from-env-01234567");
  unsetenv("SMALLEM_AUTH_TEST_TOKEN");
  EXPECT_EQ(*ResolveToken("", "SMALLEM_AUTH_TEST_TOKEN"), "");
}

TEST(LoadServerSecurityTest, UnreadableCertificateIsAnErrorNamingIt) {
  absl::StatusOr<ServerSecurity> s = LoadServerSecurity(
      {.tls_cert_file = "/nonexistent/cert.pem", .tls_key_file = "/nonexistent/key.pem"});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("/nonexistent/cert.pem"), std::string::npos);
}

TEST(LoadServerSecurityTest, CertificateWithoutKeyIsAnError) {
  absl::StatusOr<ServerSecurity> s = LoadServerSecurity({.tls_cert_file = "cert.pem"});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

// TLS with a self-signed certificate for 127.0.0.1, made by the openssl
// command at run time (scripts/setup installs it).
class AuthTlsTest : public AuthTest {
 protected:
  void SetUp() override {
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "the openssl command is not installed (scripts/setup installs it)";
    }
    const std::string command = absl::StrCat(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ",
        dir_.Join("key.pem"), " -out ", dir_.Join("cert.pem"), " >/dev/null 2>&1");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    absl::StatusOr<ServerSecurity> loaded = LoadServerSecurity(
        {.tls_cert_file = dir_.Join("cert.pem"), .tls_key_file = dir_.Join("key.pem")});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tls_ = *loaded;
  }

  ChannelSecurity TrustingClient() {
    absl::StatusOr<std::string> ca = ResolveTlsCa(dir_.Join("cert.pem"));
    EXPECT_TRUE(ca.ok()) << ca.status();
    return {.tls_ca_pem = ca.value_or("")};
  }

  ServerSecurity tls_;
};

TEST_F(AuthTlsTest, ClientTrustingTheCertificateSucceeds) {
  ServerSecurity security = tls_;
  security.client_token = kClientToken;
  Start(security, TrustingClient());
  grpc::Status status = ListExperiments(kClientToken);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(AuthTlsTest, TokensAreCheckedOverTlsToo) {
  ServerSecurity security = tls_;
  security.worker_token = kWorkerToken;
  security.client_token = kClientToken;
  Start(security, TrustingClient());
  ExpectUnauthenticated(ListExperiments(""), "client token");
  ExpectUnauthenticated(Register(kClientToken), "worker token");
  EXPECT_TRUE(Register(kWorkerToken).ok());
}

TEST_F(AuthTlsTest, PlaintextClientFails) {
  Start(tls_, ChannelSecurity{});
  grpc::Status status = ListExperiments("");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

}  // namespace
}  // namespace smallem
