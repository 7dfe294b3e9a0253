-- Rescue the running jobs of the dead workers $1 (from mark_dead.sql, with their crash-loop
-- limits $2 and the moments $3 they were declared dead): each gets a WORKER_LOST error in its
-- history and is retried at once if attempts remain, failed otherwise (remuda.retry_or_fail),
-- through the finalization seam. A job whose last
-- crash_loop_limit attempts in a row ended with their worker lost (lost_streak) is failed
-- with CRASH_LOOP instead of being handed to yet another worker. Only jobs that started before
-- the verdict are taken: a worker that comes back registers again under the same id, and what
-- it claims afterwards is its own. The conditions are checked on the rows as locked (the
-- locking subquery and the UPDATE both see the newest version), not on an older snapshot.
-- The lost worker's late writes are then rejected by the guard of complete_jobs. Finding the
-- jobs scans the table (no index on running jobs, see the migration): paid only when a worker died.
-- Only for the leader $4 at term $5 (see leader_elect.sql): the lease row is locked for the
-- statement, so no election can slip in while it runs, and a stale leader's call does nothing.
-- Returns how many were retried, failed and quarantined, and how many of each queue and kind.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $4 AND term = $5 AND expires_at > now()
    FOR SHARE
), lost AS (
    -- the rows as locked (the newest versions), with what happens to each
    SELECT x.id, x.queue, x.kind, x.flags, x.counted, x.attempt,
           x.lost_streak + 1 >= d.crash_loop_limit AS quarantined,
           CASE WHEN x.lost_streak + 1 >= d.crash_loop_limit THEN 'failed'
                ELSE remuda.retry_or_fail(x.attempt, x.max_attempts, 0) END AS new_state,
           jsonb_build_object(
               'attempt', x.attempt, 'started_at', x.started_at, 'at', now(), 'code', 'WORKER_LOST',
               'message', 'worker ' || coalesce(x.worker_id, '?') || ' stopped heartbeating while running this job',
               'worker', x.worker_id) AS error,
           CASE WHEN x.lost_streak + 1 >= d.crash_loop_limit THEN jsonb_build_object('err', jsonb_build_object(
                    'code', 'CRASH_LOOP',
                    'message', 'its last ' || (x.lost_streak + 1) || ' attempts in a row ended with their worker lost: quarantined, as the job itself may be what kills workers',
                    'data', NULL))
                ELSE jsonb_build_object('err', jsonb_build_object(
                    'code', 'WORKER_LOST',
                    'message', 'worker ' || coalesce(x.worker_id, '?') || ' stopped heartbeating while running this job',
                    'data', NULL)) END AS result,
           x.lost_streak + 1 AS lost_streak
    FROM remuda.jobs_live x
    JOIN unnest($1::text[], $2::int[], $3::timestamptz[]) AS d(worker_id, crash_loop_limit, marked_at)
      ON x.worker_id = d.worker_id
    WHERE x.state = 'running' AND x.started_at <= d.marked_at AND EXISTS (SELECT 1 FROM lease)
    ORDER BY x.id
    FOR UPDATE OF x SKIP LOCKED
), retried AS (
    UPDATE remuda.jobs_live j
    SET state = v.new_state::remuda.job_state, lost_streak = v.lost_streak,
        errors = j.errors || jsonb_build_array(v.error)
    FROM lost v
    WHERE j.id = v.id AND v.new_state <> 'failed'
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.state, j.attempt, false AS quarantined
), failed AS (
    SELECT f.id, f.queue, f.kind, f.flags, f.counted, f.state, f.attempt, v.quarantined
    FROM remuda.finish_jobs(
        ARRAY(SELECT v.id FROM lost v WHERE v.new_state = 'failed' ORDER BY v.id),
        ARRAY(SELECT 'failed'::remuda.job_state FROM lost v WHERE v.new_state = 'failed' ORDER BY v.id),
        ARRAY(SELECT v.result FROM lost v WHERE v.new_state = 'failed' ORDER BY v.id),
        ARRAY(SELECT v.error FROM lost v WHERE v.new_state = 'failed' ORDER BY v.id),
        ARRAY(SELECT v.lost_streak FROM lost v WHERE v.new_state = 'failed' ORDER BY v.id),
        ARRAY(SELECT NULL::text FROM lost v WHERE v.new_state = 'failed'),
        ARRAY(SELECT NULL::timestamptz FROM lost v WHERE v.new_state = 'failed')) f
    JOIN lost v ON v.id = f.id
), rescued AS (
    SELECT * FROM retried UNION ALL SELECT * FROM failed
)
SELECT count(*) FILTER (WHERE r.state = 'available') AS retried,
       count(*) FILTER (WHERE r.state = 'failed') AS failed,
       count(*) FILTER (WHERE r.quarantined) AS quarantined,
       (SELECT jsonb_agg(jsonb_build_object('queue', k.queue, 'kind', k.kind, 'jobs', k.jobs))
        FROM (SELECT x.queue, x.kind, count(*) AS jobs FROM rescued x GROUP BY x.queue, x.kind) k) AS by_kind,
       remuda.transitioned(array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted, 'running',
                                         r.state, r.attempt)::remuda.transition)) AS seam
FROM rescued r
