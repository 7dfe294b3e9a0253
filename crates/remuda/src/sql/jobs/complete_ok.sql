-- Write many successful outcomes at once: the lean lane, for plain jobs (flags 0), which the
-- finalization seam has nothing to do for (see migration 8). Each row is found at the place
-- the claim left it ($1, a TID scan) and written only if it is still the same run of the same
-- plain job, running for this worker ($6): id, attempt and claim time must match, as in
-- complete_jobs.sql. A row that moved since (another statement wrote it), or that became
-- flagged (a waiter came), is missed here, and the completer writes the misses again by id
-- through complete_jobs.sql, which also tells a stale write.
-- Measured against complete_jobs.sql on 100 000 outcomes in batches of 4 000: 1.99 s instead
-- of 2.45 s of PostgreSQL time (TID scan ~0.2 s, no per-row CASE and enum input ~0.26 s).
-- The state is compared as the enum here (complete_jobs.sql compares it as text to keep the
-- planner off partial indexes; the TID scan leaves it nothing to choose): the text cast ran
-- the enum's output function for every row, ~0.9 µs a job.
-- The rows are found through `j.ctid = u.tid` alone: one TID lookup per outcome, with the
-- outcome as the outer side. Never add `j.ctid = ANY($1)` beside it: the planner keeps the
-- same plan and evaluates the ANY as a filter on each lookup, a search through the whole
-- batch for every row (EXPLAIN ANALYZE, 2 000 outcomes: the lookups 17-26 ms instead of 4,
-- the statement 33-51 ms instead of 19-30, buffers the same), which halved the drain.
-- Run under sql::COMPLETE_OK_PLAN (no sequential scan, index scan, hash or merge join): the
-- lookup per outcome is then the only plan, whatever the table's size and statistics when a
-- connection planned it. Planned on an empty or small table without them, it was a
-- sequential scan of the table joined to the batch, kept for every batch as the table grew.
-- The jobs leave the live part for the finished part in this statement (DELETE … RETURNING
-- feeding the INSERT, as remuda.finish_jobs moves them; written out here for the lean
-- lane's speed); a unique job whose unique states include `completed` keeps its key in
-- remuda.unique_finished (the finished part's trigger).
WITH moved AS (
    DELETE FROM remuda.jobs_live j
    USING unnest($1::tid[], $2::bigint[], $3::int[], $4::timestamptz[], $5::jsonb[])
        AS u(tid, id, attempt, started_at, result)
    WHERE j.ctid = u.tid
      AND j.id = u.id
      AND j.state = 'running'
      AND j.worker_id = $6
      AND j.attempt = u.attempt
      AND j.started_at = u.started_at
      AND j.flags = 0
      -- a kind with notification defaults (migration 13) notifies at its success: general lane.
      -- The kinds are read once per statement (an InitPlan); a NOT EXISTS probe per row cost
      -- the 100 000-job drain ~13%.
      AND j.kind <> ALL (ARRAY(SELECT d.kind FROM remuda.notification_defaults d))
    RETURNING j.*, u.result AS new_result
)
INSERT INTO remuda.jobs_finished (
    id, state, queue, kind, priority, attempt, max_attempts, run_at, created_at, started_at,
    finished_at, expires_at, timeout_ms, worker_id, awaited, args, result, errors, lost_streak,
    unique_key, unique_states, concurrency_key, counted, target_worker, requires, unique_queue,
    flags, schedule, fire_at, workflow_id, workflow, notify, formed, group_key, traceparent,
    tracestate, fair_tag)
-- worker and claim time unchanged under the guard; written so that verification mode
-- records whose claim an outcome came from
SELECT m.id, 'completed', m.queue, m.kind, m.priority, m.attempt, m.max_attempts, m.run_at,
       m.created_at, m.started_at, now(), m.expires_at, m.timeout_ms, $6, m.awaited, m.args,
       m.new_result, m.errors, 0, m.unique_key, m.unique_states, m.concurrency_key, m.counted,
       m.target_worker, m.requires, m.unique_queue, m.flags, m.schedule, m.fire_at,
       m.workflow_id, m.workflow, m.notify, m.formed, m.group_key, m.traceparent, m.tracestate, NULL
FROM moved m
-- room freed in a limited queue (counted jobs, see claim_limited.sql), as a side effect of
-- the returned rows (the insert is the statement itself: no CTE to rescan); each queue is
-- notified once per transaction
RETURNING CASE WHEN counted THEN pg_notify('remuda_insert', queue) END
