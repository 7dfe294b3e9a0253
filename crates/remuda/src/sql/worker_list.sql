-- Live workers (heard from within their own rescue_after) with the number of jobs each is
-- running. Dead ones stay in the table until the leader has rescued their jobs.
SELECT w.id, w.name, w.host, w.pid, w.queues, w.kinds, w.capabilities, w.concurrency, w.started_at, w.heartbeat_at,
       w.running::bigint AS running
FROM remuda.workers w
WHERE w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond'
ORDER BY w.started_at, w.id
