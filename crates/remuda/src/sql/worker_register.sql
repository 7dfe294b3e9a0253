-- Register a worker, or bring its row back (the rescuer may have pruned it during a long pause).
INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
