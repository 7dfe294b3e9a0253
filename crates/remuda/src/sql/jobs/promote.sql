-- Promote up to $1 due scheduled jobs to available, wake their queues, and report when the
-- next scheduled job falls due so the promoter can sleep until then.
-- (rows found by primary key from an id array, never by a join the planner could turn into a
-- full scan: see claim.sql)
-- Only for the leader $2 at term $3 (see leader_elect.sql): the lease row is locked for the
-- statement, so no election can slip in while it runs, and a stale leader's call does nothing.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $2 AND term = $3 AND expires_at > now()
    FOR SHARE
), promoted AS (
    SELECT remuda.promote_jobs(ARRAY(
        SELECT id FROM remuda.jobs_live
        WHERE state = 'scheduled' AND run_at <= now()
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED)) AS n
    WHERE EXISTS (SELECT 1 FROM lease)
)
SELECT COALESCE((SELECT n FROM promoted), 0) AS promoted,
       (SELECT min(run_at) FROM remuda.jobs_live WHERE state = 'scheduled' AND run_at > now()) AS next_run_at
