-- Register a worker, or bring its row back after it was declared dead or forgotten (its old
-- jobs are rescued only if they started before the verdict, see rescue.sql).
INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, crash_loop_limit,
                            capabilities)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
