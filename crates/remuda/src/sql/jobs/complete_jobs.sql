-- Write the outcomes of many attempts at once, through the finalization seam: `completed`,
-- `failed`, `retry` (retried after its delay $7 if attempts remain, failed otherwise: see
-- remuda.retry_or_fail) or `snooze` (waits its delay; the attempt is not counted and no error
-- is recorded). Guarded: only a row still running for this worker ($8) in the same run
-- (attempt and claim time: a snooze or release gives the attempt number back, so it alone
-- could match a later run) is written, so a stale write is rejected. Any outcome ends a
-- streak of lost attempts (see rescue.sql). The rows written go to remuda.transitioned() in
-- the same statement; the completer runs it in a transaction whose id it keeps, so a commit
-- whose answer was lost can be told from one that failed (see completer.rs).
-- Returns how many rows it wrote, by the state they reached.
-- `j.state::text = 'running'` on purpose: compared as the enum, the planner may drive the join
-- from a partial index on running jobs (there was one, jobs_running_idx), whose statistics say
-- "almost empty" whenever ANALYZE ran while few jobs ran: every running row of this worker
-- compared with every outcome, O(n^2). Measured: a 100 000-job drain fell from 32 000 to 900
-- jobs/s with 114 s of PostgreSQL CPU. As text, only the primary key can find the rows.
WITH written AS (
    UPDATE remuda.jobs j
    SET state = remuda.outcome_state(u.outcome, j.attempt, j.max_attempts, u.delay_ms),
        attempt = j.attempt - (u.outcome = 'snooze')::int,
        lost_streak = 0,
        finished_at = CASE WHEN remuda.is_final(remuda.outcome_state(u.outcome, j.attempt, j.max_attempts, u.delay_ms))
                           THEN now() END,
        run_at = CASE WHEN u.outcome IN ('retry', 'snooze')
                           AND NOT remuda.is_final(remuda.outcome_state(u.outcome, j.attempt, j.max_attempts, u.delay_ms))
                      THEN now() + u.delay_ms * interval '1 millisecond' ELSE j.run_at END,
        result = CASE WHEN remuda.is_final(remuda.outcome_state(u.outcome, j.attempt, j.max_attempts, u.delay_ms))
                      THEN u.result END,
        errors = CASE WHEN u.error IS NULL THEN j.errors ELSE j.errors || jsonb_build_array(u.error) END,
        -- unchanged under the guard; written so that verification mode records whose claim
        -- an outcome came from
        worker_id = $8,
        started_at = u.started_at
    FROM unnest($1::bigint[], $2::int[], $3::timestamptz[], $4::text[], $5::jsonb[], $6::jsonb[], $7::bigint[])
        AS u(id, attempt, started_at, outcome, result, error, delay_ms)
    WHERE j.id = u.id
      AND j.state::text = 'running'
      AND j.worker_id = $8
      AND j.attempt = u.attempt
      AND j.started_at = u.started_at
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.state, j.attempt, u.outcome
)
SELECT count(*) AS written,
       count(*) FILTER (WHERE w.state = 'completed') AS completed,
       count(*) FILTER (WHERE w.state = 'failed') AS failed,
       count(*) FILTER (WHERE w.outcome = 'retry' AND w.state <> 'failed') AS retried,
       count(*) FILTER (WHERE w.outcome = 'snooze') AS snoozed,
       remuda.transitioned(array_agg(ROW(w.id, w.queue, w.kind, w.flags, w.counted, 'running',
                                         w.state, w.attempt)::remuda.transition)) AS seam
FROM written w
