-- 0004_diverged_runs: a run whose loss or gradient norm went non-finite ends
-- as 'diverged', a terminal status beside succeeded and failed, with the step
-- its worker stopped at and the last finite training loss it saw.
--
-- SQLite cannot change a CHECK constraint in place: the runs table is
-- rebuilt (SQLite's documented procedure; the coordinator applies
-- migrations with foreign keys off and runs PRAGMA foreign_key_check before
-- each commits). Same columns, same ids, plus:
--   diverged_step     the step training stopped at (0 unless diverged)
--   last_finite_loss  nats/token; NULL when no finite loss was seen
CREATE TABLE runs_new (
  id INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  variant_id INTEGER NOT NULL REFERENCES variants(id),
  spec_hash TEXT NOT NULL,
  seed INTEGER NOT NULL,
  budget TEXT NOT NULL,
  budget_steps INTEGER,
  budget_minutes REAL,
  status TEXT NOT NULL CHECK (status IN
    ('queued', 'leased', 'succeeded', 'failed', 'cancelled', 'diverged')),
  attempt INTEGER NOT NULL DEFAULT 0,
  engine_failures INTEGER NOT NULL DEFAULT 0,
  lease_losses INTEGER NOT NULL DEFAULT 0,
  retry_budget INTEGER NOT NULL,
  lease_worker TEXT NOT NULL DEFAULT '',
  lease_device TEXT NOT NULL DEFAULT '',
  lease_device_class TEXT NOT NULL DEFAULT '',
  lease_expires_unix_ms INTEGER NOT NULL DEFAULT 0,
  progress_step INTEGER NOT NULL DEFAULT 0,
  progress_total_steps INTEGER NOT NULL DEFAULT 0,
  progress_loss REAL NOT NULL DEFAULT 0,
  progress_tokens_per_s REAL NOT NULL DEFAULT 0,
  progress_elapsed_s REAL NOT NULL DEFAULT 0,
  progress_eta_s REAL NOT NULL DEFAULT 0,
  last_failure TEXT NOT NULL DEFAULT '',
  last_error TEXT NOT NULL DEFAULT '',
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL,
  diverged_step INTEGER NOT NULL DEFAULT 0,
  last_finite_loss REAL,
  UNIQUE (experiment_id, spec_hash, seed, budget)
);
INSERT INTO runs_new (id, experiment_id, variant_id, spec_hash, seed, budget, budget_steps,
  budget_minutes, status, attempt, engine_failures, lease_losses, retry_budget, lease_worker,
  lease_device, lease_device_class, lease_expires_unix_ms, progress_step,
  progress_total_steps, progress_loss, progress_tokens_per_s, progress_elapsed_s,
  progress_eta_s, last_failure, last_error, created_unix_ms, updated_unix_ms)
SELECT id, experiment_id, variant_id, spec_hash, seed, budget, budget_steps,
  budget_minutes, status, attempt, engine_failures, lease_losses, retry_budget, lease_worker,
  lease_device, lease_device_class, lease_expires_unix_ms, progress_step,
  progress_total_steps, progress_loss, progress_tokens_per_s, progress_elapsed_s,
  progress_eta_s, last_failure, last_error, created_unix_ms, updated_unix_ms
FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_experiment ON runs (experiment_id, id);
CREATE INDEX runs_by_expiry ON runs (status, lease_expires_unix_ms);
