-- 0006_seed_schedule: sequential seeds (docs/grid-format.md § Sequential
-- seeds). experiments.seed_schedule is the schedule of the last submission
-- as JSON, {"start": [1, 2, 3], "max": 10, "looks": [3, 5, 10]}, or '' for a
-- plain list of seeds (and for experiments submitted before this migration).
ALTER TABLE experiments ADD COLUMN seed_schedule TEXT NOT NULL DEFAULT '';
