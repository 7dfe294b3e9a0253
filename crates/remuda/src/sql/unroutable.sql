-- Per queue, the available jobs that no live worker can take: none serving the queue and the
-- kind is the named target worker (if any) and has every required capability (if any). A job
-- of a kind no live worker of its queue runs counts too: it waits until such a worker comes.
-- Scans available jobs once, grouped, so the check runs per distinct (queue, kind, routing),
-- not per job (for `remuda queues`, not for a hot path).
SELECT g.queue, sum(g.jobs)::bigint AS jobs
FROM (SELECT queue, kind, target_worker, requires, count(*) AS jobs
      FROM remuda.jobs
      WHERE state = 'available'
      GROUP BY queue, kind, target_worker, requires) g
WHERE NOT EXISTS (
      SELECT 1 FROM remuda.workers w
      WHERE w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond'
        AND g.queue = ANY (w.queues) AND g.kind = ANY (w.kinds)
        AND (g.target_worker IS NULL OR g.target_worker = w.name)
        AND (g.requires IS NULL OR g.requires <@ w.capabilities))
GROUP BY g.queue
