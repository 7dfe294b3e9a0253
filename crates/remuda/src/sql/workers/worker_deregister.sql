-- A stopping worker leaves the registry, unless it still holds running jobs (its outcomes could
-- not be written): then it is marked dead instead, so that the leader rescues those jobs and
-- prunes the row after. A row is never removed while jobs point at it.
WITH gone AS (
    DELETE FROM remuda.workers w
    WHERE w.id = $1
      AND NOT EXISTS (SELECT 1 FROM remuda.jobs_live j WHERE j.state = 'running' AND j.worker_id = $1)
    RETURNING w.id
)
UPDATE remuda.workers SET heartbeat_at = '-infinity'
WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM gone)
