-- Jobs filtered by state ($1), queue ($2) and kind ($3), any of them NULL for all; newest first.
SELECT id, kind, queue, state::text AS state, attempt, max_attempts, priority, run_at, created_at,
       started_at, finished_at, expires_at, timeout_ms, worker_id, args, result, errors,
       unique_key, concurrency_key, target_worker, requires, schedule, fire_at
FROM remuda.jobs
WHERE ($1::text IS NULL OR state = $1::text::remuda.job_state)
  AND ($2::text IS NULL OR queue = $2)
  AND ($3::text IS NULL OR kind = $3)
ORDER BY id DESC
LIMIT $4
