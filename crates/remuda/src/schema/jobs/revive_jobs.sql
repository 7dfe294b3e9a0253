-- Revive: the one transition that runs a job that is not running or waiting to run again,
-- now — an operator's retry of one job or many, and a run's retry of its map's elements.
-- Each of the jobs `ids` in one of `from_states` is locked in id order (with
-- `skip_locked`, one another transaction holds is passed over) and made available at once,
-- through the finalization seam (which wakes its queue): its error history kept, its last
-- start, worker and result cleared. Attempts: with `attempts_anew`, as many again as it had
-- (a run's retry of an element); otherwise one more if it used them all (a job never claimed
-- keeps max_attempts NULL, the worker's default). Its start deadline: `deadline_ms` from
-- now, or lifted when NULL (an expired job would expire again).
--
-- A unique job whose key another job holds now is left as it is (it would be a duplicate),
-- and a workflow's job is left to its run (remuda.of_run). Returns each job found: its state
-- before, whether it was revived now, the run it was left to, and whether its key is taken.
CREATE OR REPLACE FUNCTION remuda.revive_jobs(ids bigint[], of_run bigint,
                                              from_states remuda.job_state[], skip_locked boolean,
                                              deadline_ms bigint, attempts_anew boolean)
RETURNS TABLE (id bigint, old_state remuda.job_state, revived boolean, left_to_run bigint,
               key_taken boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    found remuda.jobs[];
    taken bigint[];
    changed remuda.transition[];
BEGIN
    found := remuda.lock_jobs(ids, skip_locked);
    -- (the key's holder found by remuda.unique_holder: the live part's unique index, else the
    -- keys held past a job's end, never a scan of the finished jobs)
    taken := ARRAY(
        SELECT f.id FROM unnest(found) f
        WHERE f.unique_key IS NOT NULL AND 'available' = ANY (f.unique_states)
          AND remuda.unique_holder(f.kind, COALESCE(f.unique_queue, ''), f.unique_key) <> f.id);
    -- a job revived into a queue at its max_depth is not refused: it was admitted once
    PERFORM set_config('remuda.reviving', 'on', true);
    WITH target AS (
        SELECT f.* FROM unnest(found) f
        WHERE f.state = ANY(from_states) AND remuda.of_run(f.workflow_id, of_run)
          AND f.id <> ALL(taken)
    ), waiting AS (
        -- a scheduled job: still live, written in place
        UPDATE remuda.jobs_live j
        SET state = 'available', run_at = now(), started_at = NULL, finished_at = NULL,
            result = NULL, worker_id = NULL, lost_streak = 0,
            -- (a job held by a pause that ended some other way is held no more)
            workflow = j.workflow - 'held_run_at' - 'held_at',
            expires_at = now() + deadline_ms * interval '1 millisecond',
            max_attempts = CASE WHEN attempts_anew THEN j.attempt + COALESCE(j.max_attempts, 1)
                                WHEN j.max_attempts IS NULL THEN NULL
                                ELSE GREATEST(j.max_attempts, j.attempt + 1) END
        FROM target t
        WHERE j.id = t.id AND t.state = 'scheduled'
        RETURNING j.id, j.queue, j.kind, j.flags, j.counted, t.state AS old_state, j.attempt
    ), moved AS (
        -- a finished job moves back to the live part (never an UPDATE across the parts; see
        -- remuda.finish_jobs); the key it held past its end is held by the live job again (the
        -- finished part's trigger frees it); its fair-share tag is given as it comes to wait
        -- (remuda.transitioned)
        DELETE FROM remuda.jobs_finished j USING target t
        WHERE j.id = t.id AND t.state <> 'scheduled'
        RETURNING j.*
    ), back AS (
        INSERT INTO remuda.jobs_live (
            id, state, queue, kind, priority, attempt, max_attempts, run_at, created_at, started_at,
            finished_at, expires_at, timeout_ms, worker_id, awaited, args, result, errors, lost_streak,
            unique_key, unique_states, concurrency_key, counted, target_worker, requires, unique_queue,
            flags, schedule, fire_at, workflow_id, workflow, notify, formed, group_key, traceparent,
            tracestate, fair_tag)
        SELECT m.id, 'available', m.queue, m.kind, m.priority, m.attempt,
               CASE WHEN attempts_anew THEN m.attempt + COALESCE(m.max_attempts, 1)
                    WHEN m.max_attempts IS NULL THEN NULL
                    ELSE GREATEST(m.max_attempts, m.attempt + 1) END,
               now(), m.created_at, NULL, NULL, now() + deadline_ms * interval '1 millisecond',
               m.timeout_ms, NULL, m.awaited, m.args, NULL, m.errors, 0, m.unique_key,
               m.unique_states, m.concurrency_key, m.counted, m.target_worker, m.requires,
               m.unique_queue, m.flags, m.schedule, m.fire_at, m.workflow_id,
               m.workflow - 'held_run_at' - 'held_at', m.notify, m.formed, m.group_key, m.traceparent,
               m.tracestate, NULL
        FROM moved m
        RETURNING remuda.jobs_live.id, remuda.jobs_live.queue, remuda.jobs_live.kind,
                  remuda.jobs_live.flags, remuda.jobs_live.counted, remuda.jobs_live.attempt
    ), done AS (
        SELECT * FROM waiting
        UNION ALL
        SELECT b.id, b.queue, b.kind, b.flags, b.counted, t.state, b.attempt
        FROM back b JOIN target t ON t.id = b.id
    )
    SELECT array_agg(ROW(d.id, d.queue, d.kind, d.flags, d.counted, d.old_state, 'available',
                         d.attempt)::remuda.transition ORDER BY d.id)
    INTO changed
    FROM done d;
    PERFORM set_config('remuda.reviving', '', true);
    PERFORM remuda.transitioned(changed);
    RETURN QUERY
    SELECT f.id, f.state, f.id = ANY(ARRAY(SELECT c.id FROM unnest(changed) c)),
           CASE WHEN NOT remuda.of_run(f.workflow_id, of_run)
                THEN f.workflow_id END,
           f.state = ANY(from_states) AND f.id = ANY(taken)
    FROM unnest(found) f ORDER BY f.id;
END
$$;
