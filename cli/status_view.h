// How smallemctl shows experiments and runs: one progress line per
// experiment (runs done, steps done / total, ETA) and a table of runs with a
// progress bar each (steps done / total, current training loss, ETA). Pure
// functions of the messages.
#ifndef SMALLEM_CLI_STATUS_VIEW_H_
#define SMALLEM_CLI_STATUS_VIEW_H_

#include <string>

#include "google/protobuf/repeated_field.h"
#include "smallem/v1/common.pb.h"

namespace smallem {

// "queued", "running", "succeeded", "failed", "cancelled", "diverged".
const char* RunStatusLabel(v1::RunStatus status);

// "demo  [########............]  3/6 runs done · 1 running · 2 queued ·
//  1200/1800 steps · ETA 1m05s"
std::string FormatExperimentLine(const v1::Experiment& experiment);

// One row per run: id, variant, seed, budget, status, bar, steps, training
// loss (nats/token, labelled so: reports give validation nats/byte), ETA;
// the last error of failed runs under their row. When a run is a mixture of
// experts, a last column "load max/mean" (1.13×: the worst MoE layer's max
// over mean tokens per expert at the last progress step; blank when dense).
std::string FormatRunTable(const google::protobuf::RepeatedPtrField<v1::Run>& runs);

// "run 12 (rope, seed 2): [#####...] 120/300 steps · train loss 4.512 nats/token ·
//  950 tok/s · ETA 12s"
// A mixture of experts' line adds " · load 1.13×" (max/mean tokens per
// expert, worst MoE layer) before the ETA. A diverged run's line ends with
// DivergedText.
std::string FormatRunLine(const v1::Run& run);

// A finished run's result JSON for a person, on one line: the validation
// loss and what it cost (steps, seconds, parameters, device class). Text
// that does not read as a result (RunResult::FromStoredJson) is shown as it
// is.
std::string FormatResult(const std::string& result_json);

// "diverged at step 40 (last finite loss 5.1234)" or "... (no finite loss)".
std::string DivergedText(const v1::Run& run);

}  // namespace smallem

#endif  // SMALLEM_CLI_STATUS_VIEW_H_
