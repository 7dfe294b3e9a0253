-- The move that ends jobs: each of the live jobs `ids` (locked by the caller) leaves
-- remuda.jobs_live and is written into remuda.jobs_finished (its day's partition) in final
-- state `states`, in one statement (DELETE … RETURNING feeding the INSERT), finished now,
-- with its result, an error appended to its history (NULL: none), its lost streak (NULL:
-- kept), and the worker and claim time of the outcome's writer (NULL: kept; verification
-- mode records whose claim an outcome came from). A job held by a pause is held no more. A
-- unique job whose final state is one of its unique states keeps its key in
-- remuda.unique_finished (the finished part's trigger, remuda.unique_finished_hold). Never an UPDATE across the parts: PostgreSQL would move the row and
-- fail any transaction that locks it meanwhile (a claim, a waiter's mark) with a
-- serialization error; a deleted row is passed over instead.
-- Every statement that ends a job but the lean lane (sql/jobs/complete_ok.sql) calls it;
-- returns the rows moved, for the seam. The live rows are found by `id = ANY(f_ids)`, an
-- index condition whatever the statistics say, and matched to their outcomes by a hash join
-- (nested loops off): a join of the live part with the unnested arrays was planned, on a
-- live part whose statistics were taken while it was small, as a walk of the whole live part
-- for each batch (0.3 s for 32 jobs among 10 000 live ones, in a plan the session kept); a
-- nested loop, or a search of the ids for each row, costs the batch's size squared (0.3 s
-- for 971 jobs, 0.6 s for a cancel of 10 000).
CREATE OR REPLACE FUNCTION remuda.finish_jobs(
    f_ids bigint[], f_states remuda.job_state[], f_results jsonb[], f_errors jsonb[],
    f_lost_streaks integer[], f_workers text[], f_tokens timestamptz[])
RETURNS TABLE (id bigint, queue text, kind text, flags integer, counted boolean,
               state remuda.job_state, attempt integer)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_nestloop = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH moved AS (
        DELETE FROM remuda.jobs_live j WHERE j.id = ANY(f_ids)
        RETURNING j.*
    ), written AS (
        -- (a finished job waits for no turn: its fair-share tag, if any, goes)
        INSERT INTO remuda.jobs_finished (
            id, state, queue, kind, priority, attempt, max_attempts, run_at, created_at, started_at,
            finished_at, expires_at, timeout_ms, worker_id, awaited, args, result, errors, lost_streak,
            unique_key, unique_states, concurrency_key, counted, target_worker, requires, unique_queue,
            flags, schedule, fire_at, workflow_id, workflow, notify, formed, group_key, traceparent,
            tracestate, fair_tag)
        SELECT m.id, u.state, m.queue, m.kind, m.priority, m.attempt, m.max_attempts, m.run_at,
               m.created_at, COALESCE(u.token, m.started_at), now(), m.expires_at, m.timeout_ms,
               COALESCE(u.worker, m.worker_id), m.awaited, m.args, u.result,
               CASE WHEN u.error IS NULL THEN m.errors ELSE m.errors || jsonb_build_array(u.error) END,
               COALESCE(u.lost_streak, m.lost_streak), m.unique_key, m.unique_states,
               m.concurrency_key, m.counted, m.target_worker, m.requires, m.unique_queue, m.flags,
               m.schedule, m.fire_at, m.workflow_id, m.workflow - 'held_run_at' - 'held_at', m.notify, m.formed,
               m.group_key, m.traceparent, m.tracestate, NULL
        FROM moved m
        JOIN unnest(f_ids, f_states, f_results, f_errors, f_lost_streaks, f_workers, f_tokens)
            AS u(id, state, result, error, lost_streak, worker, token) ON u.id = m.id
        RETURNING *
    )
    SELECT w.id, w.queue, w.kind, w.flags, w.counted, w.state, w.attempt FROM written w;
END
$$;
