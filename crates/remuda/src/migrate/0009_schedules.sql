-- remuda schema, version 9: schedules, retention, and what maintenance reports.
--
-- A schedule enqueues a job at each of its fire times. Firing a time is one transaction of
-- the maintenance leader (schedule_due.sql, schedule_fire.sql): the schedule's row is
-- locked, its job inserted with (schedule, fire_at), and next_run_at moved past it only if
-- it still holds the value read. With the unique index on (schedule, fire_at) of version 10,
-- any number of firers, stale leaders included, make one job per fire time.
CREATE TABLE remuda.schedules (
    name             text PRIMARY KEY CHECK (length(name) > 0),
    kind             text NOT NULL CHECK (length(kind) > 0),
    args             jsonb NOT NULL DEFAULT '{}',
    queue            text NOT NULL DEFAULT 'default' CHECK (length(queue) > 0),
    priority         integer NOT NULL DEFAULT 0,
    max_attempts     integer CHECK (max_attempts IS NULL OR max_attempts >= 1),
    -- the pattern's text form (`every 30s`, `daily 03:00`, `*/5 * * * *`: schedule/pattern.rs)
    pattern          text NOT NULL,
    tz               text NOT NULL DEFAULT 'UTC',
    catch_up         text NOT NULL DEFAULT 'skip' CHECK (catch_up IN ('skip', 'all', 'none')),
    catch_up_limit   integer NOT NULL DEFAULT 100 CHECK (catch_up_limit BETWEEN 1 AND 100000),
    overlap          text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip')),
    -- md5 of everything above but the name: a declaration that changes nothing writes nothing
    definition_hash  text NOT NULL,
    -- the next fire time; the firer advances it in the transaction that fires
    next_run_at      timestamptz NOT NULL CHECK (isfinite(next_run_at)),
    -- the fire time of the latest job fired, and that job
    last_run_at      timestamptz,
    last_job_id      bigint,
    runs             bigint NOT NULL DEFAULT 0,
    -- fire times passed over (catch-up, overlap, a full queue), and the last one's reason
    skipped          bigint NOT NULL DEFAULT 0,
    last_skipped_at  timestamptz,
    last_skip_reason text,
    paused           boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
-- the firer finds due schedules, and when the next falls due, here
CREATE INDEX schedules_due_idx ON remuda.schedules (next_run_at) WHERE NOT paused;

-- A fired job names its schedule and fire time (NULL for every other job: adding the
-- columns rewrites nothing).
ALTER TABLE remuda.jobs
    ADD COLUMN schedule text,
    ADD COLUMN fire_at timestamptz;

-- Retention per queue and final state, in milliseconds after finished_at: NULL takes the
-- worker's [retention] setting, -1 keeps the jobs for ever.
ALTER TABLE remuda.queues
    ADD COLUMN retain_completed_ms bigint CHECK (retain_completed_ms >= -1),
    ADD COLUMN retain_failed_ms bigint CHECK (retain_failed_ms >= -1),
    ADD COLUMN retain_cancelled_ms bigint CHECK (retain_cancelled_ms >= -1),
    ADD COLUMN retain_expired_ms bigint CHECK (retain_expired_ms >= -1);

-- Each maintenance duty's latest run, written by the leader that ran it (`remuda
-- maintenance`).
CREATE TABLE remuda.maintenance_runs (
    duty         text PRIMARY KEY,
    leader_id    text NOT NULL,
    term         bigint NOT NULL,
    started_at   timestamptz NOT NULL,
    duration_ms  double precision NOT NULL,
    ok           boolean NOT NULL,
    -- what it did ("3 fired"), or its error
    result       text NOT NULL
);
