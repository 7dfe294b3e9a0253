-- Bulk insert of jobs due now in PostgreSQL's binary COPY format (the fastest path in: no
-- per-row parse or plan, no arrays to build). Rows start `available`; run_at and created_at
-- default to now(). The statement trigger still sends one notification per queue.
COPY remuda.jobs_live (queue, kind, priority, max_attempts, expires_at, timeout_ms, args, concurrency_key, target_worker,
                  requires, group_key, traceparent, tracestate) FROM STDIN (FORMAT binary)
