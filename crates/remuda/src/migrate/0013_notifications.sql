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

-- Up to `wanted` due notifications of the `channels` a dispatcher can send, oldest due
-- first, locked (SKIP LOCKED: dispatchers never wait for one another): the dispatcher's
-- claim (notification_claim.sql) takes them. The due
-- rows are walked in notifications_due_idx order and the walk stops at `wanted`; the
-- settings keep the planner from reading every due row into a bitmap and sorting them,
-- which it chose on a table without statistics (20 000 due rows: each claim of 32 read all
-- of them, 110 deliveries/s).
CREATE FUNCTION remuda.notifications_due(wanted integer, channels text[])
RETURNS SETOF bigint LANGUAGE sql VOLATILE
SET enable_bitmapscan = off SET enable_seqscan = off SET enable_sort = off AS $$
    SELECT d.id FROM remuda.notifications d
    WHERE d.state = 'pending' AND d.next_attempt_at <= now() AND d.channel = ANY(channels)
    ORDER BY d.next_attempt_at, d.id
    LIMIT wanted
    FOR UPDATE SKIP LOCKED
$$;

-- A job's own targets. Adding a nullable column without a default rewrites nothing.
ALTER TABLE remuda.jobs ADD COLUMN notify jsonb;

-- Targets per task kind: the defaults of a worker's config, for jobs without their own.
CREATE TABLE remuda.notification_defaults (
    kind        text PRIMARY KEY CHECK (length(kind) > 0),
    notify      jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The UTC time as Standard Webhooks writes it ("2026-12-02T10:00:00.123456Z").
CREATE FUNCTION remuda.notify_time(t timestamptz)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT to_jsonb(to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
$$;

-- The seam's hook: the outbox rows for the jobs of `changed` that reached a final state their
-- targets ask for, one per channel, and one wake-up for the dispatchers (PostgreSQL sends it
-- once per transaction, whatever the number of rows). Statements that finish no job with a
-- target cost one pass over `changed`.
CREATE FUNCTION remuda.notify_outbox(changed remuda.transition[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    kinds text[] := ARRAY(SELECT d.kind FROM remuda.notification_defaults d);
    wanted bigint[];
BEGIN
    wanted := ARRAY(SELECT c.id FROM unnest(changed) c
                    WHERE remuda.is_final(c.new_state)
                      AND (c.flags & 4 <> 0 OR c.kind = ANY(kinds)));
    IF cardinality(wanted) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO remuda.notifications (job_id, workflow_id, channel, target, event, body)
    SELECT j.id, j.workflow_id, t.channel, t.target, 'job.' || j.state,
           jsonb_build_object(
               'type', 'job.' || j.state,
               'timestamp', remuda.notify_time(now()),
               'data', jsonb_build_object(
                   'id', j.id, 'kind', j.kind, 'queue', j.queue, 'state', j.state,
                   'attempt', j.attempt, 'max_attempts', j.max_attempts,
                   'result', r.tagged -> 'ok', 'error', r.tagged -> 'err',
                   'created_at', remuda.notify_time(j.created_at),
                   'finished_at', remuda.notify_time(COALESCE(j.finished_at, now())),
                   'workflow_id', j.workflow_id, 'node', j.workflow ->> 'node',
                   'index', (j.workflow ->> 'index')::integer))
    FROM remuda.jobs j
    CROSS JOIN LATERAL (SELECT COALESCE(j.notify, (SELECT d.notify FROM remuda.notification_defaults d
                                                   WHERE d.kind = j.kind)) AS n) x
    CROSS JOIN LATERAL (VALUES ('webhook', x.n ->> 'webhook'), ('email', x.n ->> 'email')) t(channel, target)
    CROSS JOIN LATERAL (SELECT remuda.wf_job_result(j.state, j.result, j.errors) AS tagged) r
    WHERE j.id = ANY(wanted)
      AND t.target IS NOT NULL
      AND x.n -> 'on' ? j.state::text
    ORDER BY j.id, t.channel;
    IF FOUND THEN
        PERFORM pg_notify('remuda_outbox', '');
    END IF;
END
$$;

INSERT INTO remuda.transition_hooks (name, function)
VALUES ('notify', 'remuda.notify_outbox(remuda.transition[])');

-- A workflow run that ends (completed, failed, cancelled) notifies the targets of its spec.
CREATE FUNCTION remuda.notify_workflow_ended()
RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n jsonb := NEW.definition -> 'notify';
BEGIN
    INSERT INTO remuda.notifications (workflow_id, channel, target, event, body)
    SELECT NEW.id, t.channel, t.target, 'workflow.' || NEW.state,
           jsonb_build_object(
               'type', 'workflow.' || NEW.state,
               'timestamp', remuda.notify_time(now()),
               'data', jsonb_build_object(
                   'id', NEW.id, 'workflow_id', NEW.id, 'name', NEW.name, 'state', NEW.state,
                   'output', NEW.output, 'error', NEW.error, 'parent_id', NEW.parent_id,
                   'created_at', remuda.notify_time(NEW.created_at),
                   'finished_at', remuda.notify_time(COALESCE(NEW.finished_at, now()))))
    FROM (VALUES ('webhook', n ->> 'webhook'), ('email', n ->> 'email')) t(channel, target)
    WHERE t.target IS NOT NULL AND n -> 'on' ? NEW.state::text
    ORDER BY t.channel;
    IF FOUND THEN
        PERFORM pg_notify('remuda_outbox', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER workflows_notify AFTER UPDATE OF state ON remuda.workflows
    FOR EACH ROW
    WHEN (NEW.definition ? 'notify' AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION remuda.notify_workflow_ended();
