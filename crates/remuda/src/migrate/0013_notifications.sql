-- remuda schema, version 13: completion notifications through a transactional outbox.
--
-- A notification (a signed webhook or an email) is a row of remuda.notifications, written in
-- the transaction that writes the final state it announces: for a job by the finalization
-- seam's hook `notify` (remuda.notify_outbox, for every statement that finishes jobs: the
-- completer, rescue, expiry, cancel), for a workflow run by a trigger on the run's final
-- state. So no crash loses one, and none is written for an outcome that rolled back. The
-- dispatcher of every worker claims due rows (SKIP LOCKED, with a lease), sends them and marks
-- them sent; a failure makes the row due again later (see notify/dispatcher.rs).
--
-- Targets: a job's own (`jobs.notify`, set at enqueue, flag bit 4 so its success takes the
-- general lane), else its kind's defaults (`remuda.notification_defaults`, written by the
-- workers from their config; the lean lane refuses the successes of those kinds), and a
-- workflow run's from its spec (`definition -> 'notify'`). Each is a document
-- {"webhook": url | null, "email": address | null, "on": [final states]}.
--
-- The functions are in schema/notify/, applied on every migrate; the seam's hook is
-- registered by version 18.

CREATE TYPE remuda.notification_state AS ENUM ('pending', 'sent', 'dead');

CREATE TABLE remuda.notifications (
    -- the idempotency key: receivers see it as `webhook-id: msg_<id>`, the same on every attempt
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- what it announces (no foreign keys: the body carries all a receiver needs, and
    -- retention prunes jobs and runs on their own schedule)
    job_id           bigint,
    workflow_id      bigint,
    channel          text NOT NULL CHECK (channel IN ('webhook', 'email')),
    target           text NOT NULL CHECK (length(target) > 0),
    -- `job.completed`, `workflow.failed`, …
    event            text NOT NULL,
    -- the webhook's JSON body, written once: every attempt sends the same bytes
    body             jsonb NOT NULL,
    state            remuda.notification_state NOT NULL DEFAULT 'pending',
    -- attempts started (a claim counts one, so a sender that dies still uses it up)
    attempts         integer NOT NULL DEFAULT 0,
    -- when a pending row is due: now, after a failure's backoff, or when a claim's lease
    -- runs out (the sender died between claim and mark: the row is sent again)
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    sent_at          timestamptz,
    -- when it became sent or dead: retention counts from here
    finished_at      timestamptz
);
-- the dispatcher's claim walks the due rows in order
CREATE INDEX notifications_due_idx ON remuda.notifications (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX notifications_job_idx ON remuda.notifications (job_id) WHERE job_id IS NOT NULL;
-- retention, per final state
CREATE INDEX notifications_finished_idx ON remuda.notifications (state, finished_at) WHERE state <> 'pending';

-- A job's own targets. Adding a nullable column without a default rewrites nothing.
ALTER TABLE remuda.jobs ADD COLUMN notify jsonb;

-- Targets per task kind: the defaults of a worker's config, for jobs without their own.
CREATE TABLE remuda.notification_defaults (
    kind        text PRIMARY KEY CHECK (length(kind) > 0),
    notify      jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER workflows_notify AFTER UPDATE OF state ON remuda.workflows
    FOR EACH ROW
    WHEN (NEW.definition ? 'notify' AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION remuda.notify_workflow_ended();
