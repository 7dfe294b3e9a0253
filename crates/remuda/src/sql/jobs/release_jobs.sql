-- Give running jobs back without burning an attempt (graceful shutdown past its timeout),
-- through the one writer of a release (remuda.release_jobs). Guarded like a completion: still
-- running for this worker ($3) in the same run (attempt $2, claim time $4); each job is
-- found by primary key and locked (waiting for a transaction that holds it), its place
-- passed to the writer. state as text: found by primary key, never by a partial index (see
-- complete_jobs.sql).
SELECT remuda.release_jobs(ARRAY(
    SELECT j.ctid
    FROM remuda.jobs_live j
    JOIN unnest($1::bigint[], $2::int[], $4::timestamptz[]) AS u(id, attempt, started_at)
      ON j.id = u.id
    WHERE j.attempt = u.attempt AND j.started_at = u.started_at
      AND j.state::text = 'running' AND j.worker_id = $3
    ORDER BY j.id
    FOR UPDATE OF j
), $3) AS released
