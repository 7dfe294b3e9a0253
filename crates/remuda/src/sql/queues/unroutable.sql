-- Per queue, the available jobs that no live worker can take: none serving the queue and the
-- kind is the named target worker (if any) and has every required capability (if any). A job
-- of a kind no live worker of its queue runs counts too: it waits until such a worker comes.
-- Scans available jobs once, grouped, so the check runs per distinct (queue, kind, routing),
-- not per job (for `remuda queues`, not for a hot path); with $1 given, only the next $1 jobs
-- to run of each queue (the dashboard: what stops a queue's head), else all.
WITH RECURSIVE queues(queue) AS (
    SELECT min(queue) FROM remuda.jobs_live WHERE state = 'available' AND $1::bigint IS NOT NULL
  UNION ALL
    SELECT (SELECT min(x.queue) FROM remuda.jobs_live x WHERE x.state = 'available' AND x.queue > q.queue)
    FROM queues q WHERE q.queue IS NOT NULL
), available AS (
    SELECT queue, kind, target_worker, requires FROM remuda.jobs_live
    WHERE state = 'available' AND $1::bigint IS NULL
  UNION ALL
    SELECT s.queue, s.kind, s.target_worker, s.requires FROM queues q
    CROSS JOIN LATERAL (
        SELECT j.queue, j.kind, j.target_worker, j.requires FROM remuda.jobs_live j
        WHERE j.state = 'available' AND j.queue = q.queue
        ORDER BY j.priority, j.run_at, j.id LIMIT $1) s
    WHERE q.queue IS NOT NULL
)
SELECT g.queue, sum(g.jobs)::bigint AS jobs
FROM (SELECT queue, kind, target_worker, requires, count(*) AS jobs
      FROM available
      GROUP BY queue, kind, target_worker, requires) g
WHERE NOT EXISTS (
      SELECT 1 FROM remuda.workers w
      WHERE w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond'
        AND g.queue = ANY (w.queues) AND g.kind = ANY (w.kinds)
        AND (g.target_worker IS NULL OR g.target_worker = w.name)
        AND (g.requires IS NULL OR g.requires <@ w.capabilities))
GROUP BY g.queue
