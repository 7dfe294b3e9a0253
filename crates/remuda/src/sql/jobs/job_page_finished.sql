-- A page of the jobs in final state $1, latest finished first, after the cursor ($2 finished_at,
-- $3 id; NULL for the first page), of queue $4 (NULL: every queue), kind $5, worker id $6 and args
-- containing $7 (each NULL for any), at most $8 rows.
-- Each queue is walked on its own in jobs_finished_idx (state, queue, finished_at) from its
-- newest end, so a page reads about $8 index entries per queue however many jobs the state
-- holds; the queues are found by skipping through the same index, one probe per queue. The
-- repeated state list lets the planner use the partial index whatever $1 is.
WITH RECURSIVE queues(queue) AS (
    SELECT min(queue) FROM remuda.jobs
    WHERE state IN ('completed', 'failed', 'cancelled', 'expired')
      AND state = $1::text::remuda.job_state AND $4::text IS NULL
  UNION ALL
    SELECT (SELECT min(x.queue) FROM remuda.jobs x
            WHERE x.state IN ('completed', 'failed', 'cancelled', 'expired')
              AND x.state = $1::text::remuda.job_state AND x.queue > q.queue)
    FROM queues q WHERE q.queue IS NOT NULL
), walked AS (
    SELECT queue FROM queues WHERE queue IS NOT NULL
    UNION ALL
    SELECT $4::text WHERE $4::text IS NOT NULL
)
SELECT page.* FROM walked w
CROSS JOIN LATERAL (
    SELECT j.id, j.kind, j.queue, j.state::text AS state, j.attempt, j.max_attempts, j.priority, j.run_at,
       j.created_at, j.started_at, j.finished_at, j.expires_at, j.timeout_ms, j.worker_id, j.args,
       j.result, j.errors, j.unique_key, j.concurrency_key, j.group_key, j.traceparent, j.tracestate, j.target_worker, j.requires, j.schedule,
       j.fire_at, j.workflow_id, j.workflow ->> 'node' AS workflow_node,
       (j.workflow ->> 'index')::integer AS workflow_index
    FROM remuda.jobs j
    WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired')
      AND j.state = $1::text::remuda.job_state AND j.queue = w.queue
      -- an index condition from the cursor on (no OR around it), then the tie on id
      AND j.finished_at <= COALESCE($2::timestamptz, 'infinity')
      AND ($2::timestamptz IS NULL OR j.finished_at < $2::timestamptz OR j.id < $3::bigint)
      AND ($5::text IS NULL OR j.kind = $5::text)
      AND ($6::text IS NULL OR j.worker_id = $6::text)
      AND ($7::jsonb IS NULL OR j.args @> $7::jsonb)
    ORDER BY j.finished_at DESC, j.id DESC
    LIMIT $8
) page
ORDER BY page.finished_at DESC, page.id DESC
LIMIT $8
