-- A page of the running jobs, newest first, below id $1 (NULL for the first page), of queue $2,
-- kind $3, worker id $4 and args containing $5 (each NULL for any), at most $6 rows. The jobs
-- are those the workers reported running at their last heartbeat (workers.running_ids), read
-- by primary key and checked to be running still: the table has no index on running jobs, and
-- a job claimed since a worker's last heartbeat shows from its next one.
SELECT j.id, j.kind, j.queue, j.state::text AS state, j.attempt, j.max_attempts, j.priority, j.run_at,
       j.created_at, j.started_at, j.finished_at, j.expires_at, j.timeout_ms, j.worker_id, j.args,
       j.result, j.errors, j.unique_key, j.concurrency_key, j.group_key, j.traceparent, j.tracestate, j.target_worker, j.requires, j.schedule,
       j.fire_at, j.workflow_id, j.workflow ->> 'node' AS workflow_node,
       (j.workflow ->> 'index')::integer AS workflow_index
FROM remuda.jobs_live j
WHERE j.id = ANY(ARRAY(SELECT unnest(w.running_ids) FROM remuda.workers w
                       WHERE $4::text IS NULL OR w.id = $4::text))
  AND j.state = 'running'
  AND ($1::bigint IS NULL OR j.id < $1::bigint)
  AND ($2::text IS NULL OR j.queue = $2::text)
  AND ($3::text IS NULL OR j.kind = $3::text)
  AND ($4::text IS NULL OR j.worker_id = $4::text)
  AND ($5::jsonb IS NULL OR j.args @> $5::jsonb)
ORDER BY j.id DESC
LIMIT $6
