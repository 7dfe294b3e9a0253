-- A page of the scheduled jobs, soonest first (run_at, id), after the cursor ($1 run_at, $2 id;
-- NULL for the first page), of queue $3, kind $4 and args containing $5 (each NULL for any),
-- at most $6 rows. Walks jobs_scheduled_idx (run_at) from the cursor on.
SELECT j.id, j.kind, j.queue, j.state::text AS state, j.attempt, j.max_attempts, j.priority, j.run_at,
       j.created_at, j.started_at, j.finished_at, j.expires_at, j.timeout_ms, j.worker_id, j.args,
       j.result, j.errors, j.unique_key, j.concurrency_key, j.group_key, j.traceparent, j.tracestate, j.target_worker, j.requires, j.schedule,
       j.fire_at, j.workflow_id, j.workflow ->> 'node' AS workflow_node,
       (j.workflow ->> 'index')::integer AS workflow_index
FROM remuda.jobs_live j
WHERE j.state = 'scheduled'
  AND j.run_at >= COALESCE($1::timestamptz, '-infinity')
  AND ($1::timestamptz IS NULL OR j.run_at > $1::timestamptz OR j.id > $2::bigint)
  AND ($3::text IS NULL OR j.queue = $3::text)
  AND ($4::text IS NULL OR j.kind = $4::text)
  AND ($5::jsonb IS NULL OR j.args @> $5::jsonb)
ORDER BY j.run_at, j.id
LIMIT $6
