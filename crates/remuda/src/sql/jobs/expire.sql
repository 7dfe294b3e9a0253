-- Move jobs whose start deadline passed before they started to `expired`, with a
-- DEADLINE_EXCEEDED error result, through the finalization seam (which tells waiters). A job
-- that has started once (it waits for a retry, after a snooze, or was given back at
-- shutdown: started_at is set) met its deadline.
-- Only for the leader $2 at term $3 (see leader_elect.sql): the lease row is locked for the
-- statement, so no election can slip in while it runs, and a stale leader's call does nothing.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $2 AND term = $3 AND expires_at > now()
    FOR SHARE
), due AS (
    -- the rows found as arrays, joined back through unnest() (estimated small: the planner
    -- finds each row by its primary key, never by a scan of the whole table)
    SELECT array_agg(x.id) AS ids, array_agg(x.state) AS states
    FROM (SELECT id, state FROM remuda.jobs
          WHERE expires_at <= now() AND state IN ('scheduled', 'available') AND started_at IS NULL
            AND EXISTS (SELECT 1 FROM lease)
          LIMIT $1 FOR UPDATE SKIP LOCKED) x
), gone AS (
    UPDATE remuda.jobs j
    SET state = 'expired', finished_at = now(),
        result = jsonb_build_object('err', jsonb_build_object(
            'code', 'DEADLINE_EXCEEDED', 'message', 'the job did not start before its deadline ' || j.expires_at, 'data', NULL))
    FROM unnest((SELECT ids FROM due), (SELECT states FROM due)) AS d(id, state)
    WHERE j.id = d.id
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, d.state AS old_state, j.attempt
)
SELECT count(*) AS expired,
       remuda.transitioned(array_agg(ROW(g.id, g.queue, g.kind, g.flags, g.counted, g.old_state,
                                         'expired', g.attempt)::remuda.transition)) AS seam
FROM gone g
