-- Move jobs whose start deadline passed before they started to `expired`, with a
-- DEADLINE_EXCEEDED error result, through the finalization seam (which tells waiters). A job
-- that has started once (it waits for a retry, after a snooze, or was given back at
-- shutdown: started_at is set) met its deadline. A job a paused workflow run holds
-- (`held_run_at`, see wf_hold.sql) is passed over: its deadline waits with it, moved at its
-- release by the time it was held.
-- Only for the leader $2 at term $3 (see leader_elect.sql): the lease row is locked for the
-- statement, so no election can slip in while it runs, and a stale leader's call does nothing.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $2 AND term = $3 AND expires_at > now()
    FOR SHARE
), due AS (
    -- the rows locked as found (the newest versions: the expiry is checked on them)
    SELECT x.id, x.state, x.expires_at FROM remuda.jobs_live x
    WHERE x.expires_at <= now() AND x.state IN ('scheduled', 'available') AND x.started_at IS NULL
      AND (x.workflow_id IS NULL OR NOT x.workflow ? 'held_run_at')
      AND EXISTS (SELECT 1 FROM lease)
    LIMIT $1 FOR UPDATE SKIP LOCKED
), gone AS (
    SELECT g.*, d.state AS old_state
    FROM remuda.finish_jobs(
        ARRAY(SELECT d.id FROM due d ORDER BY d.id),
        ARRAY(SELECT 'expired'::remuda.job_state FROM due d ORDER BY d.id),
        ARRAY(SELECT jsonb_build_object('err', jsonb_build_object(
                  'code', 'DEADLINE_EXCEEDED', 'message', 'the job did not start before its deadline ' || d.expires_at,
                  'data', NULL)) FROM due d ORDER BY d.id),
        ARRAY(SELECT NULL::jsonb FROM due d), ARRAY(SELECT NULL::int FROM due d),
        ARRAY(SELECT NULL::text FROM due d), ARRAY(SELECT NULL::timestamptz FROM due d)) g
    JOIN due d ON d.id = g.id
)
SELECT count(*) AS expired,
       remuda.transitioned(array_agg(ROW(g.id, g.queue, g.kind, g.flags, g.counted, g.old_state,
                                         'expired', g.attempt)::remuda.transition)) AS seam
FROM gone g
