-- 0002_worker_slurm: where a worker runs when Slurm started it, as it
-- registers ($SLURM_JOB_ID, $SLURMD_NODENAME); '' for a worker started any
-- other way. `smallemctl workers` shows them.
ALTER TABLE workers ADD COLUMN slurm_job_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN slurm_node TEXT NOT NULL DEFAULT '';
