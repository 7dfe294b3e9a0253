-- remuda schema, version 16: what the workers ran, minute by minute, for the dashboard's
-- overview (throughput, failure rate, wait and run percentiles over the last hour) without
-- reading the job table.
--
-- Each worker tallies its attempts per queue and minute and adds them to that minute's row
-- with its heartbeat (one upsert per queue and minute it ran jobs in). wait and run are
-- histograms: counts per bucket of remuda's metrics buckets (1 ms … 5 min, the last element
-- for anything longer), so several workers' tallies add up element by element. The
-- maintenance leader deletes rows older than the retention's `activity` (7 days).
CREATE TABLE remuda.queue_minutes (
    queue     text NOT NULL,
    minute    timestamptz NOT NULL,
    completed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    retried   bigint NOT NULL DEFAULT 0,
    wait      bigint[] NOT NULL DEFAULT '{}',
    run       bigint[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (queue, minute)
);
CREATE INDEX queue_minutes_minute_idx ON remuda.queue_minutes (minute);

-- The audit log is pruned by age too (the retention's `audit`, 90 days).
CREATE INDEX audit_at_idx ON remuda.audit (at);
