// Conversions between the store's records and the wire messages of
// smallem.v1. Plain field copies; enum names map one to one.
#ifndef SMALLEM_SERVER_SERVICE_PROTO_CONVERT_H_
#define SMALLEM_SERVER_SERVICE_PROTO_CONVERT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/queue/experiment_status.h"
#include "server/store/store_types.h"
#include "smallem/v1/common.pb.h"

namespace smallem {

v1::RunStatus ToProto(RunStatus status);
v1::FailureClass ToProto(FailureClass failure);
FailureClass FromProto(v1::FailureClass failure);

void ToProto(const ProgressRecord& progress, v1::Progress* out);
// A NaN loss becomes +infinity and a non-finite rate or time 0: what the
// store can hold (docs/architecture.md § The wire protocol).
ProgressRecord FromProto(const v1::Progress& progress);
std::vector<ProgressRecord> FromProto(
    const google::protobuf::RepeatedPtrField<v1::Progress>& points);

// `spec_json` is the run's complete spec as a worker would get it ("" to
// leave it out); `result` its recorded result, if any.
void ToProto(const RunRecord& run, const std::string& spec_json,
             const std::optional<ResultRecord>& result, v1::Run* out);
void ToProto(const ExperimentRecord& experiment, const ExperimentSummary& summary,
             v1::Experiment* out);
void ToProto(const MetricPointRecord& point, v1::MetricPoint* out);

// Devices as stored in workers.devices_json and back. InvalidArgument for
// JSON that is not a list of devices.
std::string DevicesToJson(const google::protobuf::RepeatedPtrField<v1::Device>& devices);
absl::Status DevicesFromJson(const std::string& json,
                             google::protobuf::RepeatedPtrField<v1::Device>* out);

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_PROTO_CONVERT_H_
