#include "cli/export_command.h"

#include <cstdio>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/files.h"
#include "base/text.h"
#include "cli/service_client.h"
#include "cli/session.h"
#include "cli/tfevents.h"
#include "engine/train/schedule.h"
#include "nlohmann/json.hpp"
#include "runspec/run_result.h"
#include "runspec/run_spec.h"

namespace smallem::cli {
namespace {

// What export needs of one run.
struct ExportedRun {
  v1::Run run;  // with spec_json and result_json
  std::vector<v1::MetricPoint> points;
  std::optional<Schedule> schedule;       // nullopt: the spec did not parse
  std::optional<double> budget_seconds;   // minutes budgets
  std::optional<double> val_nats_per_byte;
  int64_t val_step = 0;
};

// File-name-safe text: letters, digits, '.', '_' and '-'.
std::string Safe(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '-');
  }
  return out.empty() ? "_" : out;
}

absl::StatusOr<ExportedRun> Fetch(ServiceClient& client, int64_t run_id) {
  ExportedRun out;
  absl::StatusOr<v1::GetRunResponse> got = client.GetRun(run_id);
  if (!got.ok()) return got.status();
  out.run = got->run();
  // The first message carries every point of the current attempt so far.
  absl::Status streamed = client.StreamMetrics(run_id, [&](const v1::StreamMetricsResponse& r) {
    out.points.assign(r.points().begin(), r.points().end());
    return false;
  });
  if (!streamed.ok()) return streamed;
  const nlohmann::json spec = nlohmann::json::parse(out.run.spec_json(), nullptr, false);
  if (!spec.is_discarded()) {
    absl::StatusOr<RunSpec> parsed = RunSpec::FromJson(spec);
    if (parsed.ok()) {
      out.schedule = Schedule{.lr = parsed->lr, .warmup = parsed->warmup,
                              .min_lr_ratio = parsed->min_lr_ratio};
      if (parsed->budget.minutes) out.budget_seconds = *parsed->budget.minutes * 60;
    }
  }
  const absl::StatusOr<RunResult> result =
      RunResult::FromStoredJson(nlohmann::json::parse(out.run.result_json(), nullptr, false));
  if (result.ok()) {
    out.val_nats_per_byte = result->val_nats_per_byte;
    out.val_step = result->steps.value_or(0);
    if (out.val_step == 0 && !out.points.empty()) out.val_step = out.points.back().step();
  }
  return out;
}

// The learning rate at a point: the schedule's, at the fraction of the
// budget done (steps, or training seconds for a minutes budget).
std::optional<double> LearningRate(const ExportedRun& r, const v1::MetricPoint& p,
                                   int64_t total_steps) {
  if (!r.schedule) return std::nullopt;
  double fraction = 0;
  if (r.budget_seconds) fraction = p.elapsed_s() / *r.budget_seconds;
  else if (total_steps > 0) fraction = static_cast<double>(p.step()) / total_steps;
  return r.schedule->At(fraction);
}

absl::Status WriteTensorBoard(const std::string& dir, const std::vector<ExportedRun>& runs) {
  std::map<std::pair<std::string, int64_t>, int> seen;
  for (const ExportedRun& r : runs) ++seen[{r.run.variant(), r.run.seed()}];
  for (const ExportedRun& r : runs) {
    std::string name = Safe(r.run.variant());
    if (seen[{r.run.variant(), r.run.seed()}] > 1) {
      absl::StrAppend(&name, "_", Safe(r.run.budget()));
    }
    const double start = r.points.empty() ? r.run.created_unix_ms() / 1000.0
                                          : r.points.front().unix_ms() / 1000.0;
    EventFileWriter events(start);
    // Indented: TensorBoard's text tab renders markdown, where that is code.
    const nlohmann::json spec = nlohmann::json::parse(r.run.spec_json(), nullptr, false);
    std::string text;
    for (absl::string_view line : absl::StrSplit(spec.is_discarded() ? r.run.spec_json()
                                                                    : spec.dump(2), '\n')) {
      absl::StrAppend(&text, "    ", line, "\n");
    }
    events.AddText(0, "run_spec", text);
    const int64_t total = r.run.progress().total_steps();
    for (const v1::MetricPoint& p : r.points) {
      const double wall = p.unix_ms() / 1000.0;
      events.AddScalar(p.step(), "train/loss", p.loss(), wall);
      events.AddScalar(p.step(), "train/tokens_per_s", p.tokens_per_s(), wall);
      if (std::optional<double> lr = LearningRate(r, p, total)) {
        events.AddScalar(p.step(), "train/lr", *lr, wall);
      }
    }
    if (r.val_nats_per_byte) {
      events.AddScalar(r.val_step, "val/nats_per_byte", *r.val_nats_per_byte,
                       r.run.updated_unix_ms() / 1000.0);
    }
    const std::string run_dir = absl::StrCat(dir, "/", name, "/seed", r.run.seed());
    if (absl::Status s = events.WriteTo(run_dir); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Exact and short: 1.2345, not 1.2344999999999999.
std::string Cell(double v) { return ShortestDecimal(v); }

std::string Quoted(std::string_view text) {
  if (text.find_first_of(",\"\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

absl::Status WriteCsv(const std::string& path, const std::string& experiment,
                      const std::vector<ExportedRun>& runs) {
  std::string csv =
      "experiment,run_id,variant,seed,budget,attempt,kind,step,elapsed_s,train_loss,"
      "tokens_per_s,lr,val_nats_per_byte,unix_ms\n";
  for (const ExportedRun& r : runs) {
    const std::string head = absl::StrCat(Quoted(experiment), ",", r.run.run_id(), ",",
                                          Quoted(r.run.variant()), ",", r.run.seed(), ",",
                                          Quoted(r.run.budget()));
    const int64_t total = r.run.progress().total_steps();
    for (const v1::MetricPoint& p : r.points) {
      const std::optional<double> lr = LearningRate(r, p, total);
      absl::StrAppend(&csv, head, ",", p.attempt(), ",train,", p.step(), ",", Cell(p.elapsed_s()),
                      ",", Cell(p.loss()), ",", Cell(p.tokens_per_s()), ",",
                      lr ? Cell(*lr) : "", ",,", p.unix_ms(), "\n");
    }
    if (r.val_nats_per_byte) {
      absl::StrAppend(&csv, head, ",", r.run.attempt(), ",val,", r.val_step, ",,,,,",
                      Cell(*r.val_nats_per_byte), ",", r.run.updated_unix_ms(), "\n");
    }
  }
  return WriteFileDurably(path, csv);
}

}  // namespace

int RunExport(const ExportArgs& args) {
  if (args.tensorboard.empty() && args.csv.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "say what to write: --tensorboard DIR and/or --csv FILE"));
  }
  absl::StatusOr<Session> session = OpenSession(args.service);
  if (!session.ok()) return ReportError(session.status());
  ServiceClient& client = *session->client;
  absl::StatusOr<v1::GetExperimentResponse> e = client.GetExperiment(args.experiment);
  if (!e.ok()) return ReportError(ForSession(e.status(), args.service));
  std::vector<ExportedRun> runs;
  int64_t points = 0;
  for (const v1::Run& listed : e->runs()) {
    absl::StatusOr<ExportedRun> r = Fetch(client, listed.run_id());
    if (!r.ok()) return ReportError(r.status());
    points += static_cast<int64_t>(r->points.size());
    runs.push_back(*std::move(r));
  }
  const std::string& name = e->experiment().name();
  if (!args.tensorboard.empty()) {
    if (absl::Status s = WriteTensorBoard(args.tensorboard, runs); !s.ok()) return ReportError(s);
    std::printf("wrote TensorBoard event files of %zu runs to %s (tensorboard --logdir %s)\n",
                runs.size(), args.tensorboard.c_str(), args.tensorboard.c_str());
  }
  if (!args.csv.empty()) {
    if (absl::Status s = WriteCsv(args.csv, name, runs); !s.ok()) return ReportError(s);
    std::printf("wrote %lld metric points of %zu runs to %s\n", static_cast<long long>(points),
                runs.size(), args.csv.c_str());
  }
  return kExitOk;
}

}  // namespace smallem::cli
