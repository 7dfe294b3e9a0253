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
    SELECT x.id, d.worker_id, d.crash_loop_limit, d.marked_at
    FROM remuda.jobs x
    JOIN unnest($1::text[], $2::int[], $3::timestamptz[]) AS d(worker_id, crash_loop_limit, marked_at)
      ON x.worker_id = d.worker_id
    WHERE x.state = 'running' AND x.started_at <= d.marked_at AND EXISTS (SELECT 1 FROM lease)
    FOR UPDATE OF x SKIP LOCKED
), rescued AS (
    UPDATE remuda.jobs j
    SET state = CASE WHEN j.lost_streak + 1 >= v.crash_loop_limit THEN 'failed'
                     ELSE remuda.retry_or_fail(j.attempt, j.max_attempts, 0) END,
        lost_streak = j.lost_streak + 1,
        finished_at = CASE WHEN j.lost_streak + 1 >= v.crash_loop_limit
                             OR remuda.retry_or_fail(j.attempt, j.max_attempts, 0) = 'failed'
                           THEN now() END,
        result = CASE WHEN j.lost_streak + 1 >= v.crash_loop_limit THEN jsonb_build_object('err', jsonb_build_object(
                          'code', 'CRASH_LOOP',
                          'message', 'its last ' || (j.lost_streak + 1) || ' attempts in a row ended with their worker lost: quarantined, as the job itself may be what kills workers',
                          'data', NULL))
                      WHEN remuda.retry_or_fail(j.attempt, j.max_attempts, 0) = 'failed' THEN jsonb_build_object('err', jsonb_build_object(
                          'code', 'WORKER_LOST',
                          'message', 'worker ' || coalesce(j.worker_id, '?') || ' stopped heartbeating while running this job',
                          'data', NULL)) END,
        errors = j.errors || jsonb_build_array(jsonb_build_object(
            'attempt', j.attempt, 'started_at', j.started_at, 'at', now(), 'code', 'WORKER_LOST',
            'message', 'worker ' || coalesce(j.worker_id, '?') || ' stopped heartbeating while running this job',
            'worker', j.worker_id))
    FROM lost v
    WHERE j.id = v.id
      AND j.state = 'running' AND j.worker_id = v.worker_id AND j.started_at <= v.marked_at
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.state, j.attempt,
              j.lost_streak >= v.crash_loop_limit AS quarantined
)
SELECT count(*) FILTER (WHERE r.state = 'available') AS retried,
       count(*) FILTER (WHERE r.state = 'failed') AS failed,
       count(*) FILTER (WHERE r.quarantined) AS quarantined,
       (SELECT jsonb_agg(jsonb_build_object('queue', k.queue, 'kind', k.kind, 'jobs', k.jobs))
        FROM (SELECT x.queue, x.kind, count(*) AS jobs FROM rescued x GROUP BY x.queue, x.kind) k) AS by_kind,
       remuda.transitioned(array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted, 'running',
                                         r.state, r.attempt)::remuda.transition)) AS seam
FROM rescued r
