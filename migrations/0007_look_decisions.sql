-- 0007_look_decisions: the coordinator's decisions at the looks of
-- sequential seeds (docs/equal-time.md § Sequential seeds). One row per
-- (experiment, variant, look) once that look was decided for that variant,
-- written in the same transaction as the runs the decision queues, so a
-- look is decided once and its runs are queued once.
--   look             1-based index into the schedule's looks
--   seeds            the seeds per arm at that look (n_k)
--   outcome          'better', 'worse', 'equivalent': the arm stopped;
--                    'continue': undecided, the next look's seeds queued;
--                    'undecided': undecided at the last look, the arm stopped;
--                    'diverged', 'not compared': the arm cannot be compared
--   delta .. tau     the equal-steps comparison at the look (nats/byte;
--                    NULL where there was none)
--   alpha            the look's two-sided level of better/worse
--   equivalence_alpha  its one-sided level of each test of equivalence
--   seeds_to_decide  undecided: the seeds per arm that would likely decide
--                    it (NULL when unknown or past 1000)
--   reason           for people: the comparator's verdict text
CREATE TABLE look_decisions (
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  variant TEXT NOT NULL,
  look INTEGER NOT NULL CHECK (look >= 1),
  seeds INTEGER NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN
    ('better', 'worse', 'equivalent', 'continue', 'undecided', 'diverged', 'not compared')),
  delta REAL,
  ci_low REAL,
  ci_high REAL,
  tau REAL,
  alpha REAL NOT NULL,
  equivalence_alpha REAL NOT NULL,
  seeds_to_decide INTEGER,
  reason TEXT NOT NULL DEFAULT '',
  decided_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (experiment_id, variant, look)
) WITHOUT ROWID;
