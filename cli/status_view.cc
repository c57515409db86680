#include "cli/status_view.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/progress.h"
#include "nlohmann/json.hpp"
#include "runspec/run_result.h"

namespace smallem {
namespace {

int64_t PlannedSteps(const v1::Run& run) {
  if (run.progress().total_steps() > 0) return run.progress().total_steps();
  // budget is "steps:N" or "minutes:M".
  if (run.budget().rfind("steps:", 0) == 0) return std::atoll(run.budget().c_str() + 6);
  return 0;
}

int64_t DoneSteps(const v1::Run& run) {
  return run.status() == v1::RUN_STATUS_SUCCEEDED ? PlannedSteps(run) : run.progress().step();
}

// A mixture of experts' routing balance at its last progress step ("1.13×");
// "" for a dense run (0).
std::string LoadText(const v1::Run& run) {
  const double load = run.progress().max_over_mean_load();
  return load > 0 ? absl::StrFormat("%.2f×", load) : "";
}

}  // namespace

const char* RunStatusLabel(v1::RunStatus status) {
  switch (status) {
    case v1::RUN_STATUS_QUEUED: return "queued";
    case v1::RUN_STATUS_LEASED: return "running";
    case v1::RUN_STATUS_SUCCEEDED: return "succeeded";
    case v1::RUN_STATUS_FAILED: return "failed";
    case v1::RUN_STATUS_CANCELLED: return "cancelled";
    case v1::RUN_STATUS_DIVERGED: return "diverged";
    default: return "?";
  }
}

std::string FormatExperimentLine(const v1::Experiment& e) {
  const v1::RunCounts& c = e.counts();
  const double fraction =
      e.steps_total() > 0 ? static_cast<double>(e.steps_done()) / e.steps_total() : 0.0;
  std::string line = absl::StrCat(e.name(), "  ", FormatBar(fraction), "  ", c.succeeded(), "/",
                                   c.total(), " runs done");
  if (c.leased() > 0) absl::StrAppend(&line, " · ", c.leased(), " running");
  if (c.queued() > 0) absl::StrAppend(&line, " · ", c.queued(), " queued");
  if (c.failed() > 0) absl::StrAppend(&line, " · ", c.failed(), " failed");
  if (c.cancelled() > 0) absl::StrAppend(&line, " · ", c.cancelled(), " cancelled");
  if (c.diverged() > 0) absl::StrAppend(&line, " · ", c.diverged(), " diverged");
  absl::StrAppend(&line, " · ", e.steps_done(), "/", e.steps_total(), " steps");
  if (e.eta_s() > 0 && (c.leased() > 0 || c.queued() > 0)) {
    absl::StrAppend(&line, " · ETA ", FormatDuration(e.eta_s()));
  }
  return line;
}

std::string FormatRunLine(const v1::Run& run) {
  const int64_t total = PlannedSteps(run);
  const int64_t done = DoneSteps(run);
  std::string line = absl::StrCat("run ", run.run_id(), " (", run.variant(), ", seed ",
                                  run.seed(), "): ", RunStatusLabel(run.status()), " ",
                                  FormatBar(total > 0 ? static_cast<double>(done) / total : 0),
                                  " ", done, "/", total, " steps");
  if (run.progress().loss() > 0) {
    absl::StrAppend(&line,
                    absl::StrFormat(" · train loss %.4f nats/token", run.progress().loss()));
  }
  if (run.progress().tokens_per_s() > 0) {
    absl::StrAppend(&line, absl::StrFormat(" · %.0f tok/s", run.progress().tokens_per_s()));
  }
  if (const std::string load = LoadText(run); !load.empty()) {
    absl::StrAppend(&line, " · load ", load);
  }
  if (run.status() == v1::RUN_STATUS_LEASED && run.progress().eta_s() > 0) {
    absl::StrAppend(&line, " · ETA ", FormatDuration(run.progress().eta_s()));
  }
  if (run.status() == v1::RUN_STATUS_DIVERGED) absl::StrAppend(&line, " · ", DivergedText(run));
  return line;
}

std::string DivergedText(const v1::Run& run) {
  std::string text = absl::StrCat("diverged at step ", run.diverged_step());
  if (run.has_last_finite_loss()) {
    absl::StrAppend(&text, absl::StrFormat(" (last finite loss %.4f)", run.last_finite_loss()));
  } else {
    absl::StrAppend(&text, " (no finite loss)");
  }
  return text;
}

std::string FormatRunTable(const google::protobuf::RepeatedPtrField<v1::Run>& runs) {
  size_t variant_width = 7;
  for (const v1::Run& run : runs) variant_width = std::max(variant_width, run.variant().size());
  // The loss of a run in progress is the training loss per token; reports
  // compare validation loss per byte — the header says which this is.
  // A table with a mixture of experts adds a column: max/mean tokens per
  // expert at the last progress step, worst MoE layer (empty for dense runs).
  const bool moe = std::any_of(runs.begin(), runs.end(), [](const v1::Run& run) {
    return run.progress().max_over_mean_load() > 0;
  });
  const auto load_column = [&](const std::string& eta, const std::string& load) {
    return moe ? absl::StrFormat("%-8s  %s", eta, load) : eta;
  };
  std::string out = absl::StrFormat("%5s  %-*s  %4s  %-9s  %-22s  %11s  %16s  %s\n", "run",
                                    static_cast<int>(variant_width), "variant", "seed", "status",
                                    "progress", "steps", "train nats/token",
                                    load_column("ETA", "load max/mean"));
  for (const v1::Run& run : runs) {
    const int64_t total = PlannedSteps(run);
    const int64_t done = DoneSteps(run);
    const std::string loss =
        run.progress().loss() > 0 ? absl::StrFormat("%.4f", run.progress().loss()) : "";
    const std::string eta = run.status() == v1::RUN_STATUS_LEASED && run.progress().eta_s() > 0
                                ? FormatDuration(run.progress().eta_s())
                                : "";
    absl::StrAppend(
        &out, absl::StrFormat("%5d  %-*s  %4d  %-9s  %-22s  %11s  %16s  %s\n", run.run_id(),
                              static_cast<int>(variant_width), run.variant(), run.seed(),
                              RunStatusLabel(run.status()),
                              FormatBar(total > 0 ? static_cast<double>(done) / total : 0),
                              absl::StrCat(done, "/", total), loss,
                              load_column(eta, LoadText(run))));
    if ((run.status() == v1::RUN_STATUS_FAILED || run.status() == v1::RUN_STATUS_QUEUED) &&
        !run.last_error().empty()) {
      absl::StrAppend(&out, "       last error (attempt ", run.attempt(), "): ",
                      run.last_error(), "\n");
    }
    if (run.status() == v1::RUN_STATUS_DIVERGED) {
      absl::StrAppend(&out, "       ", DivergedText(run), "\n");
    }
  }
  return out;
}

std::string FormatResult(const std::string& result_json) {
  // A stored result is read as reports read it; one that does not read (no
  // numeric val_nats_per_byte, stored before Complete checked) is shown raw.
  const absl::StatusOr<RunResult> r = RunResult::FromStoredJson(
      nlohmann::json::parse(result_json, nullptr, /*allow_exceptions=*/false));
  if (!r.ok()) return result_json + "\n";
  std::string line = "result:";
  absl::StrAppend(&line, absl::StrFormat(" validation %.4f nats/byte", r->val_nats_per_byte));
  if (r->val_bits_per_byte) {
    absl::StrAppend(&line, absl::StrFormat(" (%.4f bits/byte)", *r->val_bits_per_byte));
  }
  if (r->steps) absl::StrAppend(&line, absl::StrFormat(" · %d steps", *r->steps));
  if (r->train_seconds) {
    absl::StrAppend(&line, absl::StrFormat(" · %.1f s of training", *r->train_seconds));
  }
  if (r->params) absl::StrAppend(&line, absl::StrFormat(" · %d parameters", *r->params));
  if (r->device_class) absl::StrAppend(&line, " · ", *r->device_class);
  // One line: the whole result (its spec, timings, every field) is the
  // dashboard's and `smallemctl export`'s to show, not a terminal's.
  return line + "\n";
}

}  // namespace smallem
