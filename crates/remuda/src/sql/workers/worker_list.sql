-- Registered workers with what each reported at its last heartbeat (jobs running, attempts
-- completed and failed since it started, processor and memory use): the live ones (heard from
-- within their own rescue_after) and the dead ones, flagged `alive = false`, which stay
-- registered until the leader has rescued every job that points at them (prune_workers.sql),
-- so an operator sees who held the jobs that are about to be rescued. A worker declared dead
-- has no last heartbeat any more (NULL).
SELECT w.id, w.name, w.host, w.pid, w.queues, w.kinds, w.capabilities, w.concurrency, w.started_at,
       NULLIF(w.heartbeat_at, '-infinity') AS heartbeat_at,
       w.running::bigint AS running, w.completed, w.failed, w.cpu_percent, w.rss_bytes,
       w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond' AS alive
FROM remuda.workers w
ORDER BY w.started_at, w.id
