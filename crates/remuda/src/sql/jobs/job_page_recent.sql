-- A page of jobs in any state, latest first by the time that fits each one's state (`at`:
-- finished_at when finished, started_at when running, else run_at), after the cursor ($1 at,
-- $2 id; NULL for the first page), of queue $3, kind $4, worker id $5 and args containing $6
-- (each NULL for any), at most $7 rows.
-- Job ids come in blocks per session, so their order is not time order; no index holds every
-- job by time either (one would cost every claim and completion an entry). Each state is
-- walked instead in its own index from its latest end, $7 rows at most per walk, and the walks
-- merged: finished jobs per (state, queue) in jobs_finished_idx, available ones per (queue,
-- priority) in jobs_available_idx, scheduled ones in jobs_scheduled_idx, running ones through
-- the workers' lists (as of their last heartbeat, as job_page_running.sql reads them). The
-- pairs walked are found by skipping through the same indexes, one probe per pair; with a
-- queue, the finished pairs are that queue's four states.
WITH RECURSIVE skipped(state, queue) AS (
    (SELECT j.state, j.queue FROM remuda.jobs j
     WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired') AND $3::text IS NULL
     ORDER BY j.state, j.queue LIMIT 1)
  UNION ALL
    SELECT x.state, x.queue FROM skipped f
    CROSS JOIN LATERAL (
        SELECT j.state, j.queue FROM remuda.jobs j
        WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired')
          AND (j.state, j.queue) > (f.state, f.queue)
        ORDER BY j.state, j.queue LIMIT 1
    ) x
), finished(state, queue) AS (
    -- one queue: its four final states, looked up directly
    SELECT state, queue FROM skipped
    UNION ALL
    SELECT s, $3::text
    FROM unnest('{completed,failed,cancelled,expired}'::remuda.job_state[]) s
    WHERE $3::text IS NOT NULL
), waiting(queue, priority) AS (
    (SELECT j.queue, j.priority FROM remuda.jobs j
     WHERE j.state = 'available' AND j.queue >= COALESCE($3::text, '') AND $5::text IS NULL
     ORDER BY j.queue, j.priority LIMIT 1)
  UNION ALL
    SELECT x.queue, x.priority FROM waiting w
    CROSS JOIN LATERAL (
        SELECT j.queue, j.priority FROM remuda.jobs j
        WHERE j.state = 'available' AND (j.queue, j.priority) > (w.queue, w.priority)
        ORDER BY j.queue, j.priority LIMIT 1
    ) x
    WHERE $3::text IS NULL OR w.queue = $3::text
), page AS (
    SELECT p.* FROM finished f
    CROSS JOIN LATERAL (
        SELECT j.*, j.finished_at AS at FROM remuda.jobs j
        WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired')
          AND j.state = f.state AND j.queue = f.queue
          AND j.finished_at <= COALESCE($1::timestamptz, 'infinity')
          AND ($1::timestamptz IS NULL OR j.finished_at < $1::timestamptz OR j.id < $2::bigint)
          AND ($4::text IS NULL OR j.kind = $4::text)
          AND ($5::text IS NULL OR j.worker_id = $5::text)
          AND ($6::jsonb IS NULL OR j.args @> $6::jsonb)
        ORDER BY j.finished_at DESC, j.id DESC
        LIMIT $7
    ) p
    UNION ALL
    SELECT p.* FROM waiting w
    CROSS JOIN LATERAL (
        SELECT j.*, j.run_at AS at FROM remuda.jobs j
        WHERE j.state = 'available' AND j.queue = w.queue AND j.priority = w.priority
          AND j.run_at <= COALESCE($1::timestamptz, 'infinity')
          AND ($1::timestamptz IS NULL OR j.run_at < $1::timestamptz OR j.id < $2::bigint)
          AND ($4::text IS NULL OR j.kind = $4::text)
          AND ($6::jsonb IS NULL OR j.args @> $6::jsonb)
        ORDER BY j.run_at DESC, j.id DESC
        LIMIT $7
    ) p
    WHERE $3::text IS NULL OR w.queue = $3::text
    UNION ALL
    (SELECT j.*, j.run_at AS at FROM remuda.jobs j
     WHERE j.state = 'scheduled' AND $5::text IS NULL
       AND j.run_at <= COALESCE($1::timestamptz, 'infinity')
       AND ($1::timestamptz IS NULL OR j.run_at < $1::timestamptz OR j.id < $2::bigint)
       AND ($3::text IS NULL OR j.queue = $3::text)
       AND ($4::text IS NULL OR j.kind = $4::text)
       AND ($6::jsonb IS NULL OR j.args @> $6::jsonb)
     ORDER BY j.run_at DESC, j.id DESC
     LIMIT $7)
    UNION ALL
    (SELECT j.*, COALESCE(j.started_at, j.run_at) AS at FROM remuda.jobs j
     WHERE j.id = ANY(ARRAY(SELECT unnest(w.running_ids) FROM remuda.workers w
                            WHERE $5::text IS NULL OR w.id = $5::text))
       AND j.state = 'running'
       AND ($1::timestamptz IS NULL
            OR (COALESCE(j.started_at, j.run_at), j.id) < ($1::timestamptz, $2::bigint))
       AND ($3::text IS NULL OR j.queue = $3::text)
       AND ($4::text IS NULL OR j.kind = $4::text)
       AND ($5::text IS NULL OR j.worker_id = $5::text)
       AND ($6::jsonb IS NULL OR j.args @> $6::jsonb)
     ORDER BY COALESCE(j.started_at, j.run_at) DESC, j.id DESC
     LIMIT $7)
)
SELECT id, kind, queue, state::text AS state, attempt, max_attempts, priority, run_at,
       created_at, started_at, finished_at, expires_at, timeout_ms, worker_id, args,
       result, errors, unique_key, concurrency_key, group_key, traceparent, tracestate, target_worker, requires, schedule,
       fire_at, workflow_id, workflow ->> 'node' AS workflow_node,
       (workflow ->> 'index')::integer AS workflow_index
FROM page
ORDER BY at DESC, id DESC
LIMIT $7
