-- Move jobs whose start deadline passed before they started to `expired`, with a
-- DEADLINE_EXCEEDED error result, notifying waiters. A job that has started once (it waits for
-- a retry, after a snooze, or was given back at shutdown: started_at is set) met its deadline.
-- Only for the leader $2 at term $3 (see leader_elect.sql): the lease row is locked for the
-- statement, so no election can slip in while it runs, and a stale leader's call does nothing.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $2 AND term = $3 AND expires_at > now()
    FOR SHARE
), gone AS (
    UPDATE remuda.jobs
    SET state = 'expired', finished_at = now(),
        result = jsonb_build_object('err', jsonb_build_object(
            'code', 'DEADLINE_EXCEEDED', 'message', 'the job did not start before its deadline ' || expires_at, 'data', NULL))
    WHERE EXISTS (SELECT 1 FROM lease) AND id = ANY(ARRAY(SELECT id FROM remuda.jobs
                         WHERE expires_at <= now() AND state IN ('scheduled', 'available')
                           AND started_at IS NULL
                         LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING id, awaited
)
SELECT (SELECT count(*) FROM gone) AS expired,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_done', g.id::text) FROM gone g WHERE g.awaited) n) AS notified
