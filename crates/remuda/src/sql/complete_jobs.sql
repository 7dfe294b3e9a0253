-- Write the outcomes of many attempts at once: completed, failed, or retried (scheduled, or
-- available when no backoff is due), or snoozed ('snooze_scheduled' / 'snooze_available':
-- waits like a retry, but the attempt is not counted and no error is recorded). Guarded: only a row still running for this worker ($7)
-- at the same attempt is written, so a rescued job's late completion is rejected.
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
    finished_at = CASE WHEN u.state IN ('completed', 'failed') THEN now() END,
    run_at = COALESCE(u.run_at, j.run_at),
    result = u.result,
    errors = CASE WHEN u.error IS NULL THEN j.errors ELSE j.errors || jsonb_build_array(u.error) END
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::jsonb[], $5::jsonb[], $6::timestamptz[])
    AS u(id, attempt, state, result, error, run_at)
WHERE j.id = u.id
  AND j.state::text = 'running'
  AND j.worker_id = $7
  AND j.attempt = u.attempt
-- notifications as side effects of the returned rows (no CTE to materialise and rescan);
-- PostgreSQL sends each distinct (channel, payload) once per transaction
RETURNING CASE WHEN j.awaited AND u.state IN ('completed', 'failed')
               THEN pg_notify('remuda_done', j.id::text) END,
          CASE WHEN u.state IN ('available', 'snooze_available') THEN pg_notify('remuda_insert', j.queue) END
