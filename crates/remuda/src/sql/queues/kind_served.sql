-- Whether a live worker runs kind $1 in queue $2 (for the warning of `remuda enqueue` about a
-- job nobody will take).
SELECT EXISTS (
    SELECT 1 FROM remuda.workers w
    WHERE w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond'
      AND $2::text = ANY (w.queues) AND $1::text = ANY (w.kinds)) AS served,
  EXISTS (
    SELECT 1 FROM remuda.workers w
    WHERE w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond') AS any_worker
