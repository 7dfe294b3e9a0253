-- Per queue, the available jobs that no live worker can take: none serving the queue and the
-- kind is the named target worker or has every required capability. Scans available jobs
-- (for `remuda queues`, not for a hot path).
SELECT j.queue, count(*) AS jobs
FROM remuda.jobs j
WHERE j.state = 'available'
  AND (j.target_worker IS NOT NULL OR j.requires IS NOT NULL)
  AND NOT EXISTS (
      SELECT 1 FROM remuda.workers w
      WHERE w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond'
        AND j.queue = ANY (w.queues) AND j.kind = ANY (w.kinds)
        AND (j.target_worker IS NULL OR j.target_worker = w.name)
        AND (j.requires IS NULL OR j.requires <@ w.capabilities))
GROUP BY j.queue
