-- Write many successful outcomes at once: the common case of complete_jobs.sql, without its
-- per-row state arithmetic. Each row is found at the place the claim left it ($1, a TID
-- scan) and written only if it is still the same run of the same job, running for this
-- worker ($6): id, attempt and claim time must match, as in complete_jobs.sql. A row that
-- moved since (another statement wrote it) is missed here, and the completer writes the
-- misses again by id through complete_jobs.sql, which also tells a stale write.
-- Measured against complete_jobs.sql on 100 000 outcomes in batches of 4 000: 1.99 s instead
-- of 2.45 s of PostgreSQL time (TID scan ~0.2 s, no per-row CASE and enum input ~0.26 s).
-- The state is compared as the enum here (complete_jobs.sql compares it as text to keep the
-- planner off partial indexes; the TID scan leaves it nothing to choose): the text cast ran
-- the enum's output function for every row, ~0.9 µs a job.
UPDATE remuda.jobs j
SET state = 'completed',
    lost_streak = 0,
    finished_at = now(),
    result = u.result
FROM unnest($1::tid[], $2::bigint[], $3::int[], $4::timestamptz[], $5::jsonb[])
    AS u(tid, id, attempt, started_at, result)
WHERE j.ctid = u.tid
  AND j.id = u.id
  AND j.state = 'running'
  AND j.worker_id = $6
  AND j.attempt = u.attempt
  AND j.started_at = u.started_at
RETURNING CASE WHEN j.awaited THEN pg_notify('remuda_done', j.id::text) END,
          CASE WHEN j.counted THEN pg_notify('remuda_insert', j.queue) END
