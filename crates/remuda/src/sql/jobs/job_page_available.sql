-- A page of the available jobs, in the order they run (priority, run_at, id), after the cursor
-- ($1 priority, $2 run_at, $3 id; NULL for the first page), of queue $4 (NULL: every queue),
-- kind $5 and args containing $6 (each NULL for any), at most $7 rows.
-- Each queue is walked on its own in jobs_available_idx (queue, priority, run_at, id), the
-- claim's own index, from the cursor on; the queues are found by skipping through it.
WITH RECURSIVE queues(queue) AS (
    SELECT min(queue) FROM remuda.jobs_live WHERE state = 'available' AND $4::text IS NULL
  UNION ALL
    SELECT (SELECT min(x.queue) FROM remuda.jobs_live x
            WHERE x.state = 'available' AND x.queue > q.queue)
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
    FROM remuda.jobs_live j
    WHERE j.state = 'available' AND j.queue = w.queue
      AND (j.priority, j.run_at, j.id)
          > (COALESCE($1::integer, -2147483648), COALESCE($2::timestamptz, '-infinity'), COALESCE($3::bigint, -1))
      AND ($5::text IS NULL OR j.kind = $5::text)
      AND ($6::jsonb IS NULL OR j.args @> $6::jsonb)
    ORDER BY j.priority, j.run_at, j.id
    LIMIT $7
) page
ORDER BY page.priority, page.run_at, page.id
LIMIT $7
