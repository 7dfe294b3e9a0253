-- remuda schema, version 22: jobs formed from many enqueues — debounced, throttled, batched.
--
-- `formed` says how a job was formed, for `remuda job ID` and for the enqueues that fold into
-- it: {"debounced": n} (n enqueues postponed it, the last one's args kept), {"throttled": n}
-- (n enqueues within its window), {"batched": n, "enqueued_at": [...]} (its args are the
-- list of n enqueues' args). NULL for every other job: a constant default, so adding it
-- rewrites nothing. The claim reads it only to drop a formed job's unique key as it starts
-- (a formed job holds its key only while it waits).
ALTER TABLE remuda.jobs ADD COLUMN formed jsonb;

-- A throttled key's last job and its window (schema/enqueue/enqueue_job.sql): the next job
-- of the key starts no sooner than `period_ms` after that job started (or, while it has not
-- started, after `next_at`). One row per kind, queue scope and key; the retention duty
-- deletes a row once its window has passed and its job has ended or is gone.
CREATE TABLE remuda.throttles (
    kind       text NOT NULL,
    scope      text NOT NULL,
    key        text NOT NULL,
    job_id     bigint NOT NULL,
    period_ms  bigint NOT NULL CHECK (period_ms > 0),
    next_at    timestamptz NOT NULL,
    PRIMARY KEY (kind, scope, key)
);
CREATE INDEX throttles_next_idx ON remuda.throttles (next_at);
