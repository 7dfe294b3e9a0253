-- The workflow run and node of job $1 (no row: a plain job, or no such job).
SELECT workflow_id, workflow ->> 'node' AS node FROM remuda.jobs WHERE id = $1 AND workflow_id IS NOT NULL
