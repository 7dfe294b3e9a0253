-- Enqueues one job and returns its id (for a duplicate of a unique job, the id of the job
-- holding the key). Every parameter after args is named and optional:
--   SELECT remuda.enqueue('email', '{"to": "a@example.com"}', queue => 'mail', delay => '5 minutes');
-- run_at or delay: not before then; deadline: expires unless started before it; timeout:
-- of each attempt; unique_key / unique_by_args with unique_states, unique_period and
-- unique_per_queue: as the Rust client's Unique; concurrency_key, target_worker, requires:
-- flow control and routing; notify: a {"webhook", "email", "on"} target. Args are limited to
-- the setting remuda.max_payload (bytes, default 1 MiB), as the client's max_payload, measured
-- on the jsonb's text (which spaces its separators: a little more than compact JSON).
CREATE OR REPLACE FUNCTION remuda.enqueue(
    kind text,
    args jsonb DEFAULT '{}',
    queue text DEFAULT 'default',
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    delay interval DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    timeout interval DEFAULT NULL,
    deadline timestamptz DEFAULT NULL,
    unique_key text DEFAULT NULL,
    unique_by_args boolean DEFAULT false,
    unique_states text[] DEFAULT NULL,
    unique_period interval DEFAULT NULL,
    unique_per_queue boolean DEFAULT false,
    concurrency_key text DEFAULT NULL,
    target_worker text DEFAULT NULL,
    requires text[] DEFAULT NULL,
    notify jsonb DEFAULT NULL
) RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    bad CONSTANT text := 'invalid_parameter_value';
    job text := enqueue.kind;
    max_payload bigint := COALESCE(NULLIF(current_setting('remuda.max_payload', true), '')::bigint, 1048576);
    start timestamptz := enqueue.run_at;
    timeout_ms bigint;
    target jsonb;
    -- any unique option asks for uniqueness (and then needs a key or by-args), as the client's
    is_unique boolean := enqueue.unique_key IS NOT NULL OR enqueue.unique_by_args OR enqueue.unique_per_queue
                         OR enqueue.unique_states IS NOT NULL OR enqueue.unique_period IS NOT NULL;
    states text[] := COALESCE(enqueue.unique_states, ARRAY['scheduled', 'available', 'running', 'completed']);
    stored_key text;
    scope text;
    period_ms bigint;
    new_id bigint;
BEGIN
    PERFORM remuda.check_name('kind', enqueue.kind, NULL);
    PERFORM remuda.check_name('queue', enqueue.queue, job);
    IF enqueue.target_worker IS NOT NULL THEN
        PERFORM remuda.check_name('target worker', enqueue.target_worker, job);
    END IF;
    IF enqueue.args IS NULL THEN
        RAISE EXCEPTION 'job %: args are NULL', job
            USING ERRCODE = bad, HINT = 'pass a JSON value such as ''{}''';
    END IF;
    IF octet_length(enqueue.args::text) > max_payload THEN
        RAISE EXCEPTION 'job %: args are % bytes, over the limit of % bytes', job, octet_length(enqueue.args::text), max_payload
            USING ERRCODE = bad, HINT = 'store large data elsewhere and pass a reference, or raise the limit (SET remuda.max_payload)';
    END IF;
    IF enqueue.priority IS NULL OR enqueue.unique_by_args IS NULL OR enqueue.unique_per_queue IS NULL THEN
        RAISE EXCEPTION 'job %: priority, unique_by_args and unique_per_queue may not be NULL', job
            USING ERRCODE = bad, HINT = 'leave them out to take their defaults';
    END IF;
    IF enqueue.notify IS NOT NULL AND jsonb_typeof(enqueue.notify) <> 'null' THEN
        target := remuda.notify_target(enqueue.notify, job);
    END IF;
    IF enqueue.max_attempts < 1 THEN
        RAISE EXCEPTION 'job %: max_attempts must be at least 1', job USING ERRCODE = bad;
    END IF;
    IF enqueue.timeout IS NOT NULL THEN
        IF enqueue.timeout <= interval '0' THEN
            RAISE EXCEPTION 'job %: timeout must be more than zero', job USING ERRCODE = bad;
        END IF;
        timeout_ms := greatest(floor(extract(epoch FROM enqueue.timeout) * 1000), 1)::bigint;
    END IF;
    IF enqueue.delay IS NOT NULL THEN
        IF start IS NOT NULL THEN
            RAISE EXCEPTION 'job %: both run_at and delay are given', job
                USING ERRCODE = bad, HINT = 'give one of them';
        END IF;
        -- the clock, not the transaction's start: a delay counts from the call, as the client's
        start := clock_timestamp() + enqueue.delay;
    END IF;
    IF enqueue.deadline IS NOT NULL THEN
        IF enqueue.deadline <= clock_timestamp() THEN
            RAISE EXCEPTION 'job %: its deadline % has passed: it would expire without running', job, enqueue.deadline
                USING ERRCODE = bad, HINT = 'give a later deadline';
        END IF;
        IF start >= enqueue.deadline THEN
            RAISE EXCEPTION 'job %: it may not start before % but must start before its deadline %: it would expire without running',
                job, start, enqueue.deadline USING ERRCODE = bad;
        END IF;
    END IF;
    IF octet_length(enqueue.concurrency_key) NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'job %: the concurrency key must be 1 to 1000 bytes', job USING ERRCODE = bad;
    END IF;
    IF octet_length(enqueue.target_worker) NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'job %: the target worker must be 1 to 1000 bytes', job USING ERRCODE = bad;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(enqueue.requires) c WHERE c IS NULL OR c ~ '^[[:space:]]*$') THEN
        RAISE EXCEPTION 'job %: a required capability is empty', job USING ERRCODE = bad;
    END IF;
    IF is_unique THEN
        IF NOT enqueue.unique_by_args AND COALESCE(enqueue.unique_key, '') = '' THEN
            RAISE EXCEPTION 'job %: a unique job needs a non-empty key, or uniqueness by args', job USING ERRCODE = bad;
        END IF;
        IF octet_length(enqueue.unique_key) > 1000 THEN
            RAISE EXCEPTION 'job %: the unique key is over 1000 bytes', job
                USING ERRCODE = bad, HINT = 'use a digest of it';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(states) s
                   WHERE s IS NULL OR s NOT IN ('scheduled', 'available', 'running', 'completed', 'failed', 'cancelled', 'expired')) THEN
            RAISE EXCEPTION 'job %: unique states % hold an unknown state', job, states
                USING ERRCODE = bad, HINT = 'states are scheduled, available, running, completed, failed, cancelled and expired';
        END IF;
        IF NOT states @> ARRAY['scheduled', 'available', 'running'] THEN
            RAISE EXCEPTION 'job %: unique states must include scheduled, available and running', job
                USING ERRCODE = bad, HINT = 'add completed, failed, cancelled or expired to keep the key longer';
        END IF;
        stored_key := COALESCE(enqueue.unique_key, '');
        IF enqueue.unique_period IS NOT NULL THEN
            period_ms := floor(extract(epoch FROM enqueue.unique_period) * 1000)::bigint;
            IF period_ms < 1 THEN
                RAISE EXCEPTION 'job %: the unique period must be at least 1 ms', job USING ERRCODE = bad;
            END IF;
            stored_key := stored_key || '@' || (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint / period_ms);
        END IF;
        IF enqueue.unique_by_args THEN
            stored_key := remuda.unique_args_key(enqueue.kind, enqueue.args)
                          || CASE WHEN stored_key = '' THEN '' ELSE '|' || stored_key END;
        END IF;
        scope := CASE WHEN enqueue.unique_per_queue THEN enqueue.queue END;
    END IF;
    -- a duplicate whose holder leaves its unique states between the insert and the lookup is
    -- inserted on the next round
    FOR round IN 1..5 LOOP
        INSERT INTO remuda.jobs AS j (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms,
                                      args, unique_key, unique_states, unique_queue, concurrency_key,
                                      target_worker, requires, notify, flags)
        VALUES (CASE WHEN start > clock_timestamp() THEN 'scheduled'::remuda.job_state ELSE 'available'::remuda.job_state END,
                enqueue.queue, enqueue.kind, enqueue.priority, enqueue.max_attempts, COALESCE(start, now()),
                enqueue.deadline, timeout_ms, enqueue.args, stored_key,
                CASE WHEN is_unique THEN states::remuda.job_state[] END, scope, enqueue.concurrency_key,
                enqueue.target_worker, enqueue.requires, target, CASE WHEN target IS NULL THEN 0 ELSE 4 END)
        ON CONFLICT (kind, (COALESCE(unique_queue, '')), unique_key)
            WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
        RETURNING j.id INTO new_id;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
        SELECT h.id INTO new_id FROM remuda.jobs h
        WHERE h.kind = enqueue.kind AND COALESCE(h.unique_queue, '') = COALESCE(scope, '')
          AND h.unique_key = stored_key AND h.state = ANY (h.unique_states);
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'job %: a unique job''s key kept changing hands while it was enqueued', job
        USING ERRCODE = 'serialization_failure', HINT = 'try again';
END
$$;
