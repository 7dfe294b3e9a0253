-- Write the outcomes of many attempts at once: completed, failed, or retried (scheduled, or
-- available when no backoff is due), or snoozed ('snooze_scheduled' / 'snooze_available':
-- waits like a retry, but the attempt is not counted and no error is recorded). Guarded: only a row still running for this worker ($7)
-- in the same run (attempt and claim time $8: a snooze or release gives the attempt number
-- back, so it alone could match a later run) is written, so a stale write is rejected.
-- Any outcome ends a streak of lost attempts (see rescue.sql).
-- Awaited jobs that reached a final state notify `remuda_done`; retries due now notify
-- `remuda_insert` for their queue.
-- `j.state::text = 'running'` on purpose: compared as the enum, the planner may drive the join
-- from a partial index on running jobs (there was one, jobs_running_idx), whose statistics say
-- "almost empty" whenever ANALYZE ran while few jobs ran: every running row of this worker
-- compared with every outcome, O(n^2). Measured: a 100 000-job drain fell from 32 000 to 900
-- jobs/s with 114 s of PostgreSQL CPU. As text, only the primary key can find the rows.
UPDATE remuda.jobs j
SET state = replace(u.state, 'snooze_', '')::remuda.job_state,
    attempt = j.attempt - (u.state LIKE 'snooze_%')::int,
    lost_streak = 0,
    finished_at = CASE WHEN u.state IN ('completed', 'failed') THEN now() END,
    run_at = COALESCE(u.run_at, j.run_at),
    result = u.result,
    errors = CASE WHEN u.error IS NULL THEN j.errors ELSE j.errors || jsonb_build_array(u.error) END
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::jsonb[], $5::jsonb[], $6::timestamptz[], $8::timestamptz[])
    AS u(id, attempt, state, result, error, run_at, started_at)
WHERE j.id = u.id
  AND j.state::text = 'running'
  AND j.worker_id = $7
  AND j.attempt = u.attempt
  AND j.started_at = u.started_at
-- notifications as side effects of the returned rows (no CTE to materialise and rescan);
-- PostgreSQL sends each distinct (channel, payload) once per transaction
RETURNING CASE WHEN j.awaited AND u.state IN ('completed', 'failed')
               THEN pg_notify('remuda_done', j.id::text) END,
          -- a job ready again, or room freed in a limited queue (counted jobs, see claim_limited.sql)
          CASE WHEN u.state IN ('available', 'snooze_available') OR j.counted
               THEN pg_notify('remuda_insert', j.queue) END
