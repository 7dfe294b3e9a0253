-- remuda schema, version 4: queue settings (flow control).
--
-- One row per queue that has settings; a queue without a row has none (not paused, no
-- limits). Workers read the rows of their queues every second and when `remuda_queue` is
-- notified, so a change takes effect within a second cluster-wide. Limits are NULL when unset.
CREATE TABLE remuda.queues (
    name            text PRIMARY KEY CHECK (length(name) > 0),
    paused          boolean NOT NULL DEFAULT false,
    -- most jobs of this queue running at once, cluster-wide
    max_running     integer CHECK (max_running IS NULL OR max_running >= 0),
    -- most running jobs per concurrency key, cluster-wide
    key_limit       integer CHECK (key_limit IS NULL OR key_limit >= 1),
    -- most starts per rate_period_ms (a token bucket shared by all workers)
    rate_limit      integer CHECK (rate_limit IS NULL OR rate_limit >= 1),
    rate_period_ms  bigint CHECK (rate_period_ms IS NULL OR rate_period_ms >= 1),
    -- what the rate applies to: the whole queue, each kind, or each concurrency key
    rate_per        text NOT NULL DEFAULT 'queue' CHECK (rate_per IN ('queue', 'kind', 'key')),
    -- most jobs waiting (available or scheduled); an enqueue beyond it is refused
    max_depth       integer CHECK (max_depth IS NULL OR max_depth >= 0),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rate_whole CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

-- Cluster-wide settings: a single row.
CREATE TABLE remuda.cluster (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    -- most jobs running at once across all queues
    max_running  integer CHECK (max_running IS NULL OR max_running >= 0),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
INSERT INTO remuda.cluster DEFAULT VALUES;

-- Limits are enforced at claim time by claim_limited.sql, which counts the running jobs it
-- claimed itself: those rows are flagged `counted` and found through this index. Jobs claimed
-- by the plain claim (queues without limits) are not in it, so they pay nothing for it.
ALTER TABLE remuda.jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN counted boolean NOT NULL DEFAULT false;
CREATE INDEX jobs_counted_running_idx ON remuda.jobs (queue, concurrency_key)
    WHERE state = 'running' AND counted;
-- Per-key fairness walks the distinct keys of a queue's available jobs; only jobs with a key
-- are in this index.
CREATE INDEX jobs_keyed_available_idx ON remuda.jobs (queue, concurrency_key, priority, run_at, id)
    WHERE state = 'available' AND concurrency_key IS NOT NULL;

-- Token buckets of rate limits, shared by all workers: one per queue, or per kind or key of
-- the queue (scope '<queue>|<kind or key>').
CREATE TABLE remuda.rate_buckets (
    scope         text PRIMARY KEY,
    tokens        double precision NOT NULL,
    refreshed_at  timestamptz NOT NULL
);

-- Routing: a job may name the worker that must run it, or capabilities the worker must all
-- have; workers register their capabilities. Claims filter on both (NULL: anyone).
ALTER TABLE remuda.jobs
    ADD COLUMN target_worker text,
    ADD COLUMN requires text[];
ALTER TABLE remuda.workers
    ADD COLUMN capabilities text[] NOT NULL DEFAULT '{}';
