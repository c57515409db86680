// SqliteStore::DeleteExperiment: an experiment and everything recorded of
// it, gone in one transaction.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/store/sqlite_store.h"

namespace smallem {

absl::StatusOr<DeletedExperiment> SqliteStore::DeleteExperiment(int64_t id, bool force) {
  DeletedExperiment deleted;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    deleted = DeletedExperiment{};
    {
      ASSIGN_OR_RETURN(SqliteStatement s, db_->Prepare("SELECT name FROM experiments WHERE id = ?"));
      s.Bind(1, id);
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return absl::NotFoundError(absl::StrCat("no experiment with id ", id));
      deleted.name = s.ColumnText(0);
    }
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("SELECT count(*) FROM runs WHERE experiment_id = ? AND "
                                    "status = 'leased'"));
      s.Bind(1, id);
      ASSIGN_OR_RETURN(bool row, s.Step());
      deleted.leased = row ? static_cast<int>(s.ColumnInt(0)) : 0;
    }
    if (deleted.leased > 0 && !force) {
      return absl::FailedPreconditionError(absl::StrCat(
          "experiment \"", deleted.name, "\" has ", deleted.leased,
          deleted.leased == 1 ? " run" : " runs",
          " running on a worker; cancel it first (`smallemctl cancel ", deleted.name,
          "`), or delete it anyway with --force (the workers stop at their next heartbeat)"));
    }
    // Children first: the foreign keys are checked at each statement.
    constexpr const char* kRuns = "(SELECT id FROM runs WHERE experiment_id = ?)";
    const auto remove = [&](const char* table,
                            const std::string& where) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare(absl::StrCat("DELETE FROM ", table, " WHERE ", where)));
      s.Bind(1, id);
      RETURN_IF_ERROR(s.Run());
      return db_->Changes();
    };
    const std::string in_runs = absl::StrCat("run_id IN ", kRuns);
    RETURN_IF_ERROR(remove("checkpoint_chunks", in_runs).status());
    ASSIGN_OR_RETURN(const int64_t checkpoints, remove("checkpoints", in_runs));
    ASSIGN_OR_RETURN(deleted.metric_points, remove("metric_points", in_runs));
    ASSIGN_OR_RETURN(const int64_t results, remove("results", in_runs));
    RETURN_IF_ERROR(remove("attempts", in_runs).status());
    ASSIGN_OR_RETURN(const int64_t runs, remove("runs", "experiment_id = ?"));
    RETURN_IF_ERROR(remove("variants", "experiment_id = ?").status());
    RETURN_IF_ERROR(remove("look_decisions", "experiment_id = ?").status());
    RETURN_IF_ERROR(remove("experiments", "id = ?").status());
    deleted.checkpoints = static_cast<int>(checkpoints);
    deleted.results = static_cast<int>(results);
    deleted.runs = static_cast<int>(runs);
    return absl::OkStatus();
  }));
  return deleted;
}

}  // namespace smallem
