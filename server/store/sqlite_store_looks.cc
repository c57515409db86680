// SqliteStore: the looks of sequential seeds — a planner's decisions and the
// runs they queue, written in the transaction that read what they decide
// from (migration 0007, table look_decisions).
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/store/sqlite_store.h"
#include "server/store/sqlite_store_rows.h"
#include "spdlog/spdlog.h"

namespace smallem {
namespace {

void BindOptional(SqliteStatement& s, int index, const std::optional<double>& v) {
  if (v) s.Bind(index, *v); else s.BindNull(index);
}

std::optional<double> OptionalDouble(const SqliteStatement& s, int column) {
  if (s.ColumnIsNull(column)) return std::nullopt;
  return s.ColumnDouble(column);
}

}  // namespace

void SqliteStore::SetLookPlanner(LookPlanner planner) {
  absl::MutexLock lock(&db_mu_);
  look_planner_ = std::move(planner);
}

absl::StatusOr<std::vector<LookDecisionRecord>> SqliteStore::ListLookDecisionsLocked(
    int64_t experiment_id) {
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT experiment_id, variant, look, seeds, outcome, delta, "
                                "ci_low, ci_high, tau, alpha, equivalence_alpha, "
                                "seeds_to_decide, reason, decided_unix_ms FROM look_decisions "
                                "WHERE experiment_id = ? ORDER BY variant, look"));
  s.Bind(1, experiment_id);
  std::vector<LookDecisionRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    LookDecisionRecord d;
    d.experiment_id = s.ColumnInt(0);
    d.variant = s.ColumnText(1);
    d.look = static_cast<int>(s.ColumnInt(2));
    d.seeds = static_cast<int>(s.ColumnInt(3));
    d.outcome = s.ColumnText(4);
    d.delta = OptionalDouble(s, 5);
    d.ci_low = OptionalDouble(s, 6);
    d.ci_high = OptionalDouble(s, 7);
    d.tau = OptionalDouble(s, 8);
    d.alpha = s.ColumnDouble(9);
    d.equivalence_alpha = s.ColumnDouble(10);
    if (!s.ColumnIsNull(11)) d.seeds_to_decide = static_cast<int>(s.ColumnInt(11));
    d.reason = s.ColumnText(12);
    d.decided_unix_ms = s.ColumnInt(13);
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::vector<LookDecisionRecord>> SqliteStore::ListLookDecisions(
    int64_t experiment_id) {
  absl::MutexLock lock(&db_mu_);
  return ListLookDecisionsLocked(experiment_id);
}

absl::StatusOr<LookPlan> SqliteStore::DecideLooksLocked(int64_t experiment_id, int64_t now_ms) {
  if (!look_planner_) return LookPlan{};
  LookInputs in;
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT id, name, baseline, grid_file, grid_yaml, "
                                  "dataset_hash, seed_schedule FROM experiments WHERE id = ?"));
    s.Bind(1, experiment_id);
    ASSIGN_OR_RETURN(bool found, s.Step());
    if (!found) return absl::NotFoundError(absl::StrCat("no experiment with id ", experiment_id));
    in.experiment = ExperimentRecord{.id = s.ColumnInt(0), .name = s.ColumnText(1),
                                     .baseline = s.ColumnText(2), .grid_file = s.ColumnText(3),
                                     .grid_yaml = s.ColumnText(4),
                                     .dataset_hash = s.ColumnText(5),
                                     .seed_schedule = s.ColumnText(6)};
  }
  // A plain list of seeds has no looks: nothing more to read.
  if (in.experiment.seed_schedule.empty()) return LookPlan{};
  ASSIGN_OR_RETURN(in.runs, QueryRunsLocked("r.experiment_id = ?", experiment_id));
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT s.run_id, s.attempt, s.result_json, s.created_unix_ms "
                                  "FROM results s JOIN runs r ON r.id = s.run_id "
                                  "WHERE r.experiment_id = ? ORDER BY s.run_id"));
    s.Bind(1, experiment_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      in.results.push_back(ResultRecord{.run_id = s.ColumnInt(0),
                                        .attempt = static_cast<int>(s.ColumnInt(1)),
                                        .result_json = s.ColumnText(2),
                                        .created_unix_ms = s.ColumnInt(3)});
    }
  }
  ASSIGN_OR_RETURN(in.decisions, ListLookDecisionsLocked(experiment_id));
  ASSIGN_OR_RETURN(LookPlan plan, look_planner_(in, now_ms));

  for (const LookDecisionRecord& d : plan.decisions) {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("INSERT INTO look_decisions (experiment_id, variant, look, "
                                  "seeds, outcome, delta, ci_low, ci_high, tau, alpha, "
                                  "equivalence_alpha, seeds_to_decide, reason, decided_unix_ms) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                                  "ON CONFLICT DO NOTHING"));
    s.Bind(1, experiment_id).Bind(2, d.variant).Bind(3, int64_t{d.look})
        .Bind(4, int64_t{d.seeds}).Bind(5, d.outcome);
    BindOptional(s, 6, d.delta);
    BindOptional(s, 7, d.ci_low);
    BindOptional(s, 8, d.ci_high);
    BindOptional(s, 9, d.tau);
    s.Bind(10, d.alpha).Bind(11, d.equivalence_alpha);
    if (d.seeds_to_decide) s.Bind(12, int64_t{*d.seeds_to_decide}); else s.BindNull(12);
    s.Bind(13, d.reason).Bind(14, now_ms);
    RETURN_IF_ERROR(s.Run());
    // A look is decided once: a planner that decides it again is wrong, and
    // its runs must not be queued on that say.
    if (db_->Changes() == 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          "experiment ", experiment_id, ": look ", d.look, " of ", d.variant,
          " is already decided"));
    }
  }
  for (const CellRecord& cell : plan.cells) {
    int64_t variant_id = 0;
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("SELECT id FROM variants WHERE experiment_id = ? AND "
                                    "name = ? AND spec_hash = ?"));
      s.Bind(1, experiment_id).Bind(2, cell.variant).Bind(3, cell.spec_hash);
      ASSIGN_OR_RETURN(bool found, s.Step());
      if (!found) {
        return absl::FailedPreconditionError(absl::StrCat(
            "experiment ", experiment_id, " has no variant \"", cell.variant, "\" with spec ",
            cell.spec_hash, "; a look queues seeds of the submitted variants only"));
      }
      variant_id = s.ColumnInt(0);
    }
    // The same cell again (a baseline that two open arms need) is one run.
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("INSERT INTO runs (experiment_id, variant_id, spec_hash, seed, "
                                  "budget, budget_steps, budget_minutes, status, retry_budget, "
                                  "created_unix_ms, updated_unix_ms) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?) "
                                  "ON CONFLICT DO NOTHING"));
    s.Bind(1, experiment_id).Bind(2, variant_id).Bind(3, cell.spec_hash).Bind(4, cell.seed)
        .Bind(5, cell.budget);
    if (cell.budget_steps) s.Bind(6, *cell.budget_steps); else s.BindNull(6);
    if (cell.budget_minutes) s.Bind(7, *cell.budget_minutes); else s.BindNull(7);
    s.Bind(8, int64_t{plan.retry_budget}).Bind(9, now_ms).Bind(10, now_ms);
    RETURN_IF_ERROR(s.Run());
  }
  return plan;
}

void SqliteStore::MaybeDecideLooksLocked(int64_t experiment_id, int64_t now_ms) {
  if (!look_planner_) return;
  if (absl::Status s = db_->Exec("SAVEPOINT look"); !s.ok()) {
    spdlog::warn("experiment {}: its looks are decided later: {}", experiment_id, s.ToString());
    return;
  }
  absl::StatusOr<LookPlan> plan = DecideLooksLocked(experiment_id, now_ms);
  if (!plan.ok()) {
    // The result stays; the decision is taken again at the next Complete
    // of the experiment or when the coordinator starts.
    spdlog::warn("experiment {}: its looks are decided later: {}", experiment_id,
                 plan.status().ToString());
    db_->Exec("ROLLBACK TO look").IgnoreError();
  }
  db_->Exec("RELEASE look").IgnoreError();
}

absl::StatusOr<LookPlan> SqliteStore::DecideLooks(int64_t experiment_id, int64_t now_ms) {
  LookPlan out;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(out, DecideLooksLocked(experiment_id, now_ms));
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace smallem
