-- Lock up to $1 schedules due now (oldest first), for the firer's transaction, with what it
-- needs to fire them: whether the last job fired is still waiting or running (for overlap =
-- skip) and the database's clock. Rows another firer holds are passed over.
SELECT s.name, s.pattern, s.tz, s.catch_up, s.catch_up_limit, s.overlap, s.next_run_at,
       (s.overlap = 'skip' AND EXISTS (
            SELECT 1 FROM remuda.jobs_live j
            WHERE j.id = s.last_job_id AND j.state IN ('scheduled', 'available', 'running'))) AS busy,
       now() AS now
FROM remuda.schedules s
WHERE NOT s.paused AND s.next_run_at <= now()
ORDER BY s.next_run_at, s.name
LIMIT $1
FOR UPDATE OF s SKIP LOCKED
