-- 0001_init: the coordinator's tables. Applied in one transaction; the
-- coordinator then sets PRAGMA user_version = 1. Never edit an applied file:
-- add 0002_....sql instead.
--
-- Times are Unix epoch milliseconds (*_unix_ms). Statuses are the lower-case
-- names of smallem.v1.RunStatus; failure classes those of FailureClass.

-- One submitted grid; resubmitting a grid of the same name updates it.
CREATE TABLE experiments (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  baseline TEXT NOT NULL,
  grid_file TEXT NOT NULL,
  grid_yaml TEXT NOT NULL,          -- text of the last submission
  dataset_hash TEXT NOT NULL,       -- content hash of the grid's dataset
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL
);

-- A named variant (or the reference curve, kind = 'reference'): its
-- canonical run spec without data, seed and budget, and that spec's SHA-256.
CREATE TABLE variants (
  id INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('variant', 'reference')),
  spec_json TEXT NOT NULL,
  spec_hash TEXT NOT NULL,
  UNIQUE (experiment_id, name, spec_hash)
);

-- One cell: (spec_hash, seed, budget) of an experiment; budget is
-- "steps:N" or "minutes:M" with the number repeated in budget_steps or
-- budget_minutes. `attempt` is the number of the latest
-- attempt (0 = never leased); lease_* describe the current lease when
-- status = 'leased'; progress_* the latest progress report.
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  variant_id INTEGER NOT NULL REFERENCES variants(id),
  spec_hash TEXT NOT NULL,
  seed INTEGER NOT NULL,
  budget TEXT NOT NULL,
  budget_steps INTEGER,
  budget_minutes REAL,
  status TEXT NOT NULL CHECK (status IN
    ('queued', 'leased', 'succeeded', 'failed', 'cancelled')),
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
  UNIQUE (experiment_id, spec_hash, seed, budget)
);
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_experiment ON runs (experiment_id, id);
CREATE INDEX runs_by_expiry ON runs (status, lease_expires_unix_ms);

-- Every attempt of every run: who ran it and how it ended ('' while
-- running, then 'succeeded', 'lease_lost', 'engine_error',
-- 'invalid_config' or 'cancelled').
CREATE TABLE attempts (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  attempt INTEGER NOT NULL,
  worker_id TEXT NOT NULL,
  device TEXT NOT NULL,
  device_class TEXT NOT NULL,
  started_unix_ms INTEGER NOT NULL,
  ended_unix_ms INTEGER NOT NULL DEFAULT 0,
  outcome TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, attempt)
) WITHOUT ROWID;

-- Training curve points, per attempt.
CREATE TABLE metric_points (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  attempt INTEGER NOT NULL,
  step INTEGER NOT NULL,
  loss REAL NOT NULL,
  tokens_per_s REAL NOT NULL,
  elapsed_s REAL NOT NULL,
  unix_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt, step)
) WITHOUT ROWID;

-- The one recorded result of a run (Result JSON, DESIGN.md § Formats).
CREATE TABLE results (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  attempt INTEGER NOT NULL,
  result_json TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL
);

CREATE TABLE workers (
  id TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  devices_json TEXT NOT NULL,       -- [{"name":..,"device_class":..,"memory_bytes":..}]
  registered_unix_ms INTEGER NOT NULL,
  last_seen_unix_ms INTEGER NOT NULL
);

-- Prepared datasets by content hash; complete = 1 once every chunk is in.
CREATE TABLE datasets (
  content_hash TEXT PRIMARY KEY,
  total_bytes INTEGER NOT NULL DEFAULT 0,
  complete INTEGER NOT NULL DEFAULT 0,
  created_unix_ms INTEGER NOT NULL
);

CREATE TABLE dataset_chunks (
  content_hash TEXT NOT NULL REFERENCES datasets(content_hash),
  file_name TEXT NOT NULL,
  file_offset INTEGER NOT NULL,
  file_size INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (content_hash, file_name, file_offset)
);
