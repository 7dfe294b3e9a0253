-- One job, every column the CLI and the API show.
SELECT id, kind, queue, state::text AS state, attempt, max_attempts, priority, run_at, created_at,
       started_at, finished_at, expires_at, timeout_ms, worker_id, args, result, errors,
       unique_key, concurrency_key, target_worker, requires, schedule, fire_at, workflow_id,
       workflow ->> 'node' AS workflow_node, (workflow ->> 'index')::integer AS workflow_index
FROM remuda.jobs
WHERE id = $1
