-- remuda schema, version 8: one finalization seam.
--
-- Every statement that moves a job out of `running` or into a final state (the completer's
-- writes, retry and snooze, release at shutdown and of orphans, rescue, expiry, cancel, an
-- operator's retry) hands the rows it changed to remuda.transitioned(), in the same
-- statement and so the same transaction. That function is the one place where what follows a
-- state change is written: the notifications for waiters and workers, and whatever the
-- registered hooks (remuda.transition_hooks) add. Rows it writes commit or roll back with the
-- state change itself.
--
-- The one exception is the completer's lean lane (complete_ok.sql): the successes of jobs
-- whose flags are 0, the bulk of the work, are written without the seam, for speed. A job
-- that needs the seam at its success says so by a flag, set when it is enqueued (or, for a
-- waiter, when it starts waiting); the lean lane refuses flagged rows and the completer then
-- writes them through the general lane.
--
-- The functions (the seam, remuda.transitioned, and the outcome rules) are in schema/jobs/,
-- applied on every migrate.

-- Per-job flags, a bit set (0 for a plain job):
--   1  awaited: a waiter wants `remuda_done` at its final state (replaces the `awaited` column)
-- Higher bits are reserved for the floors that hook into the seam (workflow nodes,
-- completion notifications). A job with any bit set is finished through the general lane.
-- Adding the column rewrites nothing (a constant default). The `awaited` column stays, unused
-- by this version, for the workers of the previous one during a rolling upgrade (their
-- statements name it); a later migration drops it. Nothing is copied from it: a waiter of
-- the previous version that marked a job just before the upgrade finds its result by its
-- one-second poll instead of a notification, and a copy would scan the whole table under
-- the lock this ALTER takes.
ALTER TABLE remuda.jobs ADD COLUMN flags integer NOT NULL DEFAULT 0;

-- One changed row, as the seam and its hooks receive it.
CREATE TYPE remuda.transition AS (
    id         bigint,
    queue      text,
    kind       text,
    flags      integer,
    -- counted by a limited queue's claim (claim_limited.sql): its end frees room there
    counted    boolean,
    old_state  remuda.job_state,
    new_state  remuda.job_state,
    attempt    integer
);

-- Work registered to run in the seam: each function is called once per statement, as
-- `function(remuda.transition[])`, with the rows that statement changed, in name order,
-- inside the transaction of the change. What an error it raises does is the seam's to say
-- (schema/jobs/transitioned.sql: from version 19, a conflict rolls the change back and any
-- other error is set aside for the rows it concerns).
CREATE TABLE remuda.transition_hooks (
    name      text PRIMARY KEY CHECK (length(name) > 0),
    function  regprocedure NOT NULL,
    added_at  timestamptz NOT NULL DEFAULT now()
);
