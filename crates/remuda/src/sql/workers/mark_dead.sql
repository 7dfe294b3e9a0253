-- Declare dead the workers silent for longer than their own rescue_after (or already marked:
-- heartbeat_at = '-infinity'), and return them with the moment of the verdict. Silence counts
-- from the moment the server last began to take writes at the earliest: no worker can
-- heartbeat while the server is down or recovering, so a restart that outlasted rescue_after
-- does not rescue, and run again, the jobs of every worker that ran them to the end meanwhile
-- and writes their outcomes as it comes back; each gets its rescue_after from then to be heard
-- again. That moment is the start of the WAL writer, which runs only once recovery has ended
-- (after a restart, the server's reset after a crash of one of its processes, or a promotion);
-- where this role may not see it, the server's start. The mark is
-- what fences them: a dead worker's heartbeat (worker_heartbeat.sql) no longer succeeds, so it
-- learns it was declared dead and stops its jobs before registering again. Cheap (the workers
-- table is small), so the rescuer runs it every round and scans jobs only when it finds some.
-- Only for the leader $1 at term $2 (see leader_elect.sql): the lease row is locked for the
-- statement, so no election can slip in while it runs, and a stale leader's call does nothing.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $1 AND term = $2 AND expires_at > now()
    FOR SHARE
)
UPDATE remuda.workers
SET heartbeat_at = '-infinity'
WHERE (heartbeat_at = '-infinity'
       OR greatest(heartbeat_at, pg_postmaster_start_time(),
                   (SELECT max(a.backend_start) FROM pg_stat_activity a
                    WHERE a.backend_type = 'walwriter'))
          < now() - rescue_after_ms * interval '1 millisecond')
  AND EXISTS (SELECT 1 FROM lease)
RETURNING id, crash_loop_limit, now() AS marked_at
