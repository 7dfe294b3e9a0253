-- A page of the jobs of workflow run $1, latest first by the time that fits each one's state
-- (as job_page_recent.sql), after the cursor ($2 at, $3 id; NULL for the first page), in
-- state $4, queue $5, kind $6, worker id $7 and args containing $8 (each NULL for any), at
-- most $9 rows. A run's jobs are found in jobs_workflow_idx and sorted: a run holds as many
-- jobs as its nodes and map elements.
SELECT id, kind, queue, state::text AS state, attempt, max_attempts, priority, run_at,
       created_at, started_at, finished_at, expires_at, timeout_ms, worker_id, args,
       result, errors, unique_key, concurrency_key, group_key, traceparent, tracestate, target_worker, requires, schedule,
       fire_at, workflow_id, workflow ->> 'node' AS workflow_node,
       (workflow ->> 'index')::integer AS workflow_index
FROM remuda.jobs j
CROSS JOIN LATERAL (
    SELECT CASE WHEN j.state IN ('completed', 'failed', 'cancelled', 'expired')
                THEN COALESCE(j.finished_at, j.created_at)
                WHEN j.state = 'running' THEN COALESCE(j.started_at, j.run_at)
                ELSE j.run_at END AS at
) t
WHERE j.workflow_id = $1::bigint
  AND ($2::timestamptz IS NULL OR (t.at, j.id) < ($2::timestamptz, $3::bigint))
  AND ($4::text IS NULL OR j.state = $4::text::remuda.job_state)
  AND ($5::text IS NULL OR j.queue = $5::text)
  AND ($6::text IS NULL OR j.kind = $6::text)
  AND ($7::text IS NULL OR j.worker_id = $7::text)
  AND ($8::jsonb IS NULL OR j.args @> $8::jsonb)
ORDER BY t.at DESC, j.id DESC
LIMIT $9
