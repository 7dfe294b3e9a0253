-- Write the outcomes of many attempts at once (complete_jobs.sql, through the finalization
-- seam): `completed`, `failed`, `retry` (retried after its delay if attempts remain, failed
-- otherwise: see remuda.retry_or_fail) or `snooze` (waits its delay; the attempt is not
-- counted and no error is recorded). Each row is found at its place (`tids`, from
-- remuda.job_places, which locked the rows: one TID lookup per outcome) and written only if
-- it is still the same run running for `worker`: id, attempt and claim time must match (a
-- snooze or release gives the attempt number back, so it alone could match a later run), so
-- a stale write is rejected. Any outcome ends a streak of lost attempts (see rescue.sql).
-- Returns the rows written, for the seam.
-- Its settings leave the planner one way to the rows, the TID lookup per outcome, whatever
-- the table held when a connection planned it; they hold in this function only, not in the
-- seam's hooks that run after it. Joined to the outcomes by id instead, a batch on a never
-- analysed table was planned as a scan of the table's running rows (estimated at one row)
-- joined to the outcomes by a nested loop: 999 outcomes compared with 999 rows each, about
-- 150 ms of a 10 000-element map's 800. One plan for every call, whatever the batch's size
-- (the settings fix its shape): under `plan_cache_mode = auto`, which the general lane's
-- small batches run under, PostgreSQL planned it again at each call, 0.21 ms of a one-outcome
-- batch instead of 0.02.
CREATE OR REPLACE FUNCTION remuda.write_outcomes(
    tids tid[], ids bigint[], attempts integer[], started timestamptz[], outcomes text[],
    results jsonb[], errors jsonb[], delays bigint[], worker text)
RETURNS TABLE (id bigint, queue text, kind text, flags integer, counted boolean,
               state remuda.job_state, attempt integer, outcome text)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_indexscan = off SET enable_bitmapscan = off
SET enable_hashjoin = off SET enable_mergejoin = off SET plan_cache_mode = force_generic_plan AS $$
-- (the parameters named by the function's name: `errors` is also a column)
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH cur AS (
        SELECT j.id, u.tid, u.outcome, u.result, u.error, u.delay_ms, u.started_at,
               remuda.outcome_state(u.outcome, j.attempt, j.max_attempts, u.delay_ms) AS new_state
        FROM unnest(write_outcomes.tids, write_outcomes.ids, write_outcomes.attempts, write_outcomes.started,
                    write_outcomes.outcomes, write_outcomes.results, write_outcomes.errors, write_outcomes.delays)
            AS u(tid, id, attempt, started_at, outcome, result, error, delay_ms)
        JOIN remuda.jobs_live j ON j.ctid = u.tid
        WHERE j.id = u.id
          AND j.state = 'running'
          AND j.worker_id = write_outcomes.worker
          AND j.attempt = u.attempt
          AND j.started_at = u.started_at
    ), stay AS (
        -- retried or snoozed: still live, written in place
        UPDATE remuda.jobs_live j
        SET state = c.new_state,
            attempt = j.attempt - (c.outcome = 'snooze')::int,
            lost_streak = 0,
            run_at = now() + c.delay_ms * interval '1 millisecond',
            errors = CASE WHEN c.error IS NULL THEN j.errors ELSE j.errors || jsonb_build_array(c.error) END,
            -- unchanged under the guard; written so that verification mode records whose
            -- claim an outcome came from
            worker_id = write_outcomes.worker,
            started_at = c.started_at
        FROM cur c
        WHERE j.ctid = c.tid AND NOT remuda.is_final(c.new_state)
        RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.state, j.attempt, c.outcome
    ), ended AS (
        -- completed or failed: moved to the finished part
        SELECT f.id, f.queue, f.kind, f.flags, f.counted, f.state, f.attempt, c.outcome
        FROM remuda.finish_jobs(
            ARRAY(SELECT c.id FROM cur c WHERE remuda.is_final(c.new_state) ORDER BY c.id),
            ARRAY(SELECT c.new_state FROM cur c WHERE remuda.is_final(c.new_state) ORDER BY c.id),
            ARRAY(SELECT c.result FROM cur c WHERE remuda.is_final(c.new_state) ORDER BY c.id),
            ARRAY(SELECT c.error FROM cur c WHERE remuda.is_final(c.new_state) ORDER BY c.id),
            ARRAY(SELECT 0 FROM cur c WHERE remuda.is_final(c.new_state) ORDER BY c.id),
            ARRAY(SELECT write_outcomes.worker FROM cur c WHERE remuda.is_final(c.new_state) ORDER BY c.id),
            ARRAY(SELECT c.started_at FROM cur c WHERE remuda.is_final(c.new_state) ORDER BY c.id)) f
        JOIN cur c ON c.id = f.id
    )
    SELECT * FROM stay UNION ALL SELECT * FROM ended;
END
$$;
