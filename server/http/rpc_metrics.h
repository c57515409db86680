// RpcMetrics: how many calls each gRPC method served, with which status, and
// how long they took (a histogram per method), as /metrics reports them.
// MakeRpcMetricsInterceptor records every call the coordinator's gRPC server
// runs (calls refused for a missing token never reach it).
//
// Thread-safe.
#ifndef SMALLEM_SERVER_HTTP_RPC_METRICS_H_
#define SMALLEM_SERVER_HTTP_RPC_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_interceptor.h"

namespace smallem {

class RpcMetrics {
 public:
  // Upper bounds of the latency histogram's buckets, in seconds (+Inf last).
  static constexpr std::array<double, 10> kBucketSeconds = {0.001, 0.005, 0.01, 0.05, 0.1,
                                                            0.5,   1,     5,    30,   300};

  struct Method {
    std::map<std::string, int64_t> calls_by_code;  // "OK", "NOT_FOUND", ...
    std::array<int64_t, kBucketSeconds.size()> buckets{};  // calls ≤ each bound
    int64_t count = 0;
    double seconds_sum = 0;
  };

  // Records one finished call of `method` ("/smallem.v1.ClientService/Submit").
  void Record(std::string_view method, std::string_view code, double seconds);
  // Every method seen so far, by name.
  std::map<std::string, Method> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Method, std::less<>> methods_ ABSL_GUARDED_BY(mu_);
};

// The name of a gRPC status code as Prometheus labels show it ("OK").
std::string GrpcCodeName(int code);

// An interceptor factory for ServerBuilder::experimental().SetInterceptorCreators
// recording each call into `metrics` (which must outlive the server).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptor(RpcMetrics* metrics);

}  // namespace smallem

#endif  // SMALLEM_SERVER_HTTP_RPC_METRICS_H_
