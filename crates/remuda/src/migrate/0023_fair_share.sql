-- remuda schema, version 23: weighted fair share between the groups (tenants, accounts) of a
-- queue.
--
-- A job may carry a group, independent of its concurrency key (a group may hold many keys).
-- NULL for every job without one: a constant default, so adding it rewrites nothing, and such
-- jobs enter no new index.
ALTER TABLE remuda.jobs ADD COLUMN group_key text;

-- With `fairness = 'group'` the limited claim (sql/jobs/claim_limited.sql) shares a queue's
-- starts between its groups by weight: start-time fair queueing. `fair_clock` is the queue's
-- virtual time, the start tag of the last job it started; a group that comes back from idle
-- starts from it, so it neither lost nor saved up a share while it had nothing waiting.
ALTER TABLE remuda.queues
    ADD COLUMN fairness text CHECK (fairness IN ('group')),
    ADD COLUMN fair_clock double precision NOT NULL DEFAULT 0;

-- The groups of a fair queue: their weights, and their virtual time (`vtime`: the start tag
-- of their next job; each start adds 1/weight). Rows are written by the claims for the groups
-- they start jobs of, and by `remuda queue group` for weights; the retention duty deletes a
-- row of weight 1 once its group has been idle a while (it then starts again from the
-- queue's clock, as it would anyway). The group '' stands for the jobs without a group.
-- `starts` counts the starts of the current minute from `window_at`, `starts_before` those
-- of the minute before: the share of starts over the last minute, for `remuda queue groups`.
CREATE TABLE remuda.queue_groups (
    queue          text NOT NULL,
    name           text NOT NULL,
    weight         double precision NOT NULL DEFAULT 1 CHECK (weight >= 0.001 AND weight <= 1000),
    vtime          double precision NOT NULL DEFAULT 0,
    starts         bigint NOT NULL DEFAULT 0,
    starts_before  bigint NOT NULL DEFAULT 0,
    window_at      timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, name)
);
-- (its index on the job table: migration 25, built without blocking)
