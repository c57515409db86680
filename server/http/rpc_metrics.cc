#include "server/http/rpc_metrics.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace smallem {
namespace {

// Times one call from its creation to its end and records it there.
class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(RpcMetrics* metrics, const char* method)
      : metrics_(metrics), method_(method), start_(std::chrono::steady_clock::now()) {}

  // A call that ended without a status (the client left) counts as CANCELLED.
  ~MetricsInterceptor() override {
    if (!recorded_) Record(grpc::StatusCode::CANCELLED);
  }

  // Recorded before the status leaves: a client that got its answer finds
  // its call counted.
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!recorded_ && methods->QueryInterceptionHookPoint(
                          grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      Record(static_cast<int>(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  RpcMetrics* const metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
  bool recorded_ = false;

  void Record(int code) {
    recorded_ = true;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    metrics_->Record(method_, GrpcCodeName(code), seconds);
  }
};

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(RpcMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info->method() != nullptr ? info->method() : "");
  }

 private:
  RpcMetrics* const metrics_;
};

}  // namespace

void RpcMetrics::Record(std::string_view method, std::string_view code, double seconds) {
  absl::MutexLock lock(&mu_);
  auto it = methods_.find(method);
  if (it == methods_.end()) it = methods_.emplace(std::string(method), Method{}).first;
  Method& m = it->second;
  ++m.calls_by_code[std::string(code)];
  for (size_t i = 0; i < kBucketSeconds.size(); ++i) {
    if (seconds <= kBucketSeconds[i]) ++m.buckets[i];
  }
  ++m.count;
  m.seconds_sum += seconds;
}

std::map<std::string, RpcMetrics::Method> RpcMetrics::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return {methods_.begin(), methods_.end()};
}

std::string GrpcCodeName(int code) {
  // gRPC's codes are abseil's, number for number (0 OK … 16 UNAUTHENTICATED).
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) return "UNKNOWN";
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptor(RpcMetrics* metrics) {
  return std::make_unique<MetricsInterceptorFactory>(metrics);
}

}  // namespace smallem
