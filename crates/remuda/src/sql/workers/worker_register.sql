-- Register a worker, or bring its row back after it was declared dead or forgotten (its old
-- jobs are rescued only if they started before the verdict, see rescue.sql), with what it
-- says of itself now: a row the leader made for it while it was forgotten
-- (forgotten_workers.sql) holds no settings of its own, and its rescue_after of 0 kept would
-- declare it dead at every round. Returns when
-- this installation's schema was first made (microseconds since 1970): the seed of the trace
-- ids of jobs outside any trace, the same for every worker (see remuda::telemetry).
INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, crash_loop_limit,
                            capabilities)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (id) DO UPDATE
SET name = EXCLUDED.name, host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
    kinds = EXCLUDED.kinds, concurrency = EXCLUDED.concurrency,
    rescue_after_ms = EXCLUDED.rescue_after_ms, crash_loop_limit = EXCLUDED.crash_loop_limit,
    capabilities = EXCLUDED.capabilities, heartbeat_at = now()
RETURNING (SELECT (extract(epoch FROM m.applied_at) * 1000000)::bigint
           FROM remuda.schema_migrations m ORDER BY m.version LIMIT 1) AS installation
