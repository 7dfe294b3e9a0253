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
-- inside the transaction of the change. An error it raises rolls the change back (the
-- completer retries the write with backoff and reports it; a cancel or retry fails).
CREATE TABLE remuda.transition_hooks (
    name      text PRIMARY KEY CHECK (length(name) > 0),
    function  regprocedure NOT NULL,
    added_at  timestamptz NOT NULL DEFAULT now()
);

-- Retry or fail, decided here and only here, for every attempt that ended in an error that
-- may be retried (a task's retryable error, a lost worker): the next attempt is due after
-- delay_ms (scheduled, or available at once when 0) if the job has attempts left, else the
-- job fails. A plain SQL expression, inlined into the statements that use it.
CREATE FUNCTION remuda.retry_or_fail(attempt integer, max_attempts integer, delay_ms bigint)
RETURNS remuda.job_state LANGUAGE sql STABLE AS $$
    SELECT (CASE WHEN attempt >= COALESCE(max_attempts, 1) THEN 'failed'
                 WHEN delay_ms > 0 THEN 'scheduled'
                 ELSE 'available' END)::remuda.job_state
$$;

-- The state a worker's outcome moves its running job to: `completed`, `failed` (an error not
-- to be retried), `retry` (an error to retry after delay_ms, if attempts remain) or `snooze`
-- (wait delay_ms; the attempt is given back). NULL for an unknown outcome, which the NOT
-- NULL state refuses as bad data.
CREATE FUNCTION remuda.outcome_state(outcome text, attempt integer, max_attempts integer, delay_ms bigint)
RETURNS remuda.job_state LANGUAGE sql STABLE AS $$
    SELECT CASE outcome
               WHEN 'completed' THEN 'completed'::remuda.job_state
               WHEN 'failed' THEN 'failed'::remuda.job_state
               WHEN 'retry' THEN remuda.retry_or_fail(attempt, max_attempts, delay_ms)
               WHEN 'snooze' THEN (CASE WHEN delay_ms > 0 THEN 'scheduled' ELSE 'available' END)::remuda.job_state
           END
$$;

-- Whether a state is final: the job will not run again unless an operator retries it.
CREATE FUNCTION remuda.is_final(state remuda.job_state)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT state IN ('completed', 'failed', 'cancelled', 'expired')
$$;

-- The seam: what follows the state changes of `changed`, written in their transaction.
-- * waiters of awaited jobs that reached a final state hear `remuda_done` (the job id);
-- * workers hear `remuda_insert` (the queue) for jobs that became available, and for
--   counted jobs that stopped running (room freed in a limited queue);
-- * each registered hook runs with the rows.
-- PostgreSQL sends each distinct (channel, payload) once per transaction. Returns how many
-- rows it was given. Strict: a statement that changed nothing calls it with NULL and it does
-- nothing.
CREATE FUNCTION remuda.transitioned(changed remuda.transition[])
RETURNS integer LANGUAGE plpgsql STRICT AS $$
DECLARE
    hook regprocedure;
BEGIN
    PERFORM pg_notify('remuda_done', c.id::text)
    FROM unnest(changed) c
    WHERE c.flags & 1 <> 0 AND remuda.is_final(c.new_state);
    PERFORM pg_notify('remuda_insert', w.queue)
    FROM (SELECT DISTINCT c.queue FROM unnest(changed) c
          WHERE c.new_state = 'available' OR (c.counted AND c.old_state = 'running')) w;
    FOR hook IN SELECT h.function FROM remuda.transition_hooks h ORDER BY h.name LOOP
        -- a hook whose function was dropped since (regprocedure keeps no dependency) is
        -- passed over, with a warning, rather than failing every state change
        IF to_regprocedure(hook::text) IS NULL THEN
            RAISE WARNING 'remuda: transition hook function % no longer exists; skipped (delete it from remuda.transition_hooks)', hook::oid;
            CONTINUE;
        END IF;
        EXECUTE format('SELECT %s($1)', hook::regproc) USING changed;
    END LOOP;
    RETURN cardinality(changed);
END
$$;
