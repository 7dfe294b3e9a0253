-- Give running jobs back without burning an attempt (graceful shutdown past its timeout):
-- available again, attempt restored, through the finalization seam (which wakes the queues
-- so another worker takes them). Guarded like a completion: still running for this worker
-- ($3) in the same run (attempt $2, claim time $4). started_at is kept: the job has started
-- once, so its deadline no longer applies (see expire.sql).
WITH released AS (
    UPDATE remuda.jobs_live j
    SET state = 'available', attempt = j.attempt - 1, worker_id = NULL
    FROM unnest($1::bigint[], $2::int[], $4::timestamptz[]) AS u(id, attempt, started_at)
    -- state as text: found by primary key, never by a partial index (see complete_jobs.sql)
    WHERE j.id = u.id AND j.attempt = u.attempt AND j.started_at = u.started_at
      AND j.state::text = 'running' AND j.worker_id = $3
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.attempt
)
SELECT count(*) AS released,
       remuda.transitioned(array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted, 'running',
                                         'available', r.attempt)::remuda.transition)) AS seam
FROM released r
