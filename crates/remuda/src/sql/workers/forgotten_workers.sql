-- Register as dead the workers that running jobs name but the registry no longer holds, so
-- that the rescue takes their jobs as any dead worker's (mark_dead.sql, rescue.sql). A row
-- is removed only once no job runs for it (worker_deregister.sql, prune_workers.sql), but a
-- claim of that worker can still commit after the removal looked: a claim the server went on
-- to finish after its worker was killed, or one whose answer was lost while its worker
-- stopped. Its jobs would then run for no one, never rescued. Scans the live jobs (no index
-- on running jobs): run every few maintenance rounds, not each.
-- Only for the leader $1 at term $2 (see leader_elect.sql). Returns the workers registered.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $1 AND term = $2 AND expires_at > now()
    FOR SHARE
)
INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
SELECT DISTINCT j.worker_id, j.worker_id, '', 0, '{}'::text[], '{}'::text[], 0, 0, '-infinity'::timestamptz
FROM remuda.jobs_live j
WHERE j.state = 'running' AND j.worker_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM remuda.workers w WHERE w.id = j.worker_id)
  AND EXISTS (SELECT 1 FROM lease)
ON CONFLICT (id) DO NOTHING
RETURNING id
