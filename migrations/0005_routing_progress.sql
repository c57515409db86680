-- 0005_routing_progress: a mixture of experts' routing balance with the
-- run's progress. max/mean load = the most tokens one expert received in the
-- step / the mean tokens per expert, in the worst MoE layer (1 = perfectly
-- even); 0 for a dense model and for rows written before this migration.
--   runs.progress_max_over_mean_load   of the latest progress point
--   metric_points.max_over_mean_load   of each curve point
ALTER TABLE runs ADD COLUMN progress_max_over_mean_load REAL NOT NULL DEFAULT 0;
ALTER TABLE metric_points ADD COLUMN max_over_mean_load REAL NOT NULL DEFAULT 0;
