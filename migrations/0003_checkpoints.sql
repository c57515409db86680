-- 0003_checkpoints: the last checkpoint of each unfinished run
-- (docs/reliability.md), stored as chunks like a dataset. A run has at most
-- one complete checkpoint (complete = 1; a newer one replaces it once whole
-- and checked) and the one being uploaded; both go when the run's result is
-- recorded or the run ends for good. device_class is the class of the
-- device that trained it: the run resumes only on that class.
CREATE TABLE checkpoints (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  sha256 TEXT NOT NULL,             -- of the whole file, lower-case hex
  attempt INTEGER NOT NULL,         -- the attempt that wrote it
  step INTEGER NOT NULL,            -- optimizer steps it holds
  device_class TEXT NOT NULL,
  total_bytes INTEGER NOT NULL,
  complete INTEGER NOT NULL DEFAULT 0,
  created_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, sha256)
);

CREATE TABLE checkpoint_chunks (
  run_id INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  file_offset INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (run_id, sha256, file_offset),
  FOREIGN KEY (run_id, sha256) REFERENCES checkpoints(run_id, sha256)
);
