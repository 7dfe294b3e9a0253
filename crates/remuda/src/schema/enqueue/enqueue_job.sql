-- Enqueues one job, as remuda.enqueue (whose parameters it takes, and the formations
-- below), and says what it did: the job's id, whether the enqueue was folded into a job that
-- was waiting (`joined`: debounced, throttled or batched into it), and whether it was a
-- duplicate of a unique job (the id is then the holder's). The Rust client and the CLI
-- enqueue formed jobs through it; remuda.enqueue returns its id.
--
-- Formations (one at most; schema/enqueue/check_formation.sql checks them):
--   debounce (with a unique key): while a job of this kind and key waits, an enqueue
--     replaces its args and moves its start to now + debounce (never past its first
--     enqueue + debounce_max): one run once the enqueues stop. See enqueue_debounced.sql.
--   throttle (with a unique key): at most one job of this kind and key starts per
--     throttle; an enqueue within the window joins the job waiting for the window's end
--     (keeping its args, or with throttle_latest taking the latest). See enqueue_throttled.sql.
--   batch_key (with batch_size and batch_wait): enqueues with the key accumulate into one
--     job whose args are the list of their args, which runs when batch_size is reached or
--     batch_wait has passed since the first. See enqueue_batched.sql.
-- Each is race-free under concurrent enqueues of one key and works in the caller's
-- transaction.
--
-- group_key: the job's group, by which a queue with fair share on shares its starts (`group`
-- is a reserved word in SQL, hence the name). A formed job takes the group of the enqueue
-- that made it.
--
-- traceparent, tracestate: the W3C trace context the job continues (its attempts run as
-- children of it); checked as remuda's clients check it.
-- (the signatures of versions before groups and trace contexts: replaced by this one)
DROP FUNCTION IF EXISTS remuda.enqueue_job(text, jsonb, text, integer, timestamptz, interval, integer, interval,
    timestamptz, text, boolean, text[], interval, boolean, text, text, text[], jsonb, interval, interval, interval,
    boolean, text, integer, interval);
DROP FUNCTION IF EXISTS remuda.enqueue_job(text, jsonb, text, integer, timestamptz, interval, integer, interval,
    timestamptz, text, boolean, text[], interval, boolean, text, text, text[], jsonb, interval, interval, interval,
    boolean, text, integer, interval, text);
CREATE OR REPLACE FUNCTION remuda.enqueue_job(
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
    notify jsonb DEFAULT NULL,
    debounce interval DEFAULT NULL,
    debounce_max interval DEFAULT NULL,
    throttle interval DEFAULT NULL,
    throttle_latest boolean DEFAULT false,
    batch_key text DEFAULT NULL,
    batch_size integer DEFAULT NULL,
    batch_wait interval DEFAULT NULL,
    group_key text DEFAULT NULL,
    traceparent text DEFAULT NULL,
    tracestate text DEFAULT NULL
) RETURNS TABLE (id bigint, joined boolean, duplicate boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    bad CONSTANT text := 'invalid_parameter_value';
    job text := enqueue_job.kind;
    max_payload bigint := COALESCE(NULLIF(current_setting('remuda.max_payload', true), '')::bigint, 1048576);
    start timestamptz := enqueue_job.run_at;
    timeout_ms bigint;
    target jsonb;
    -- any unique option asks for uniqueness (and then needs a key or by-args), as the client's
    is_unique boolean := enqueue_job.unique_key IS NOT NULL OR enqueue_job.unique_by_args OR enqueue_job.unique_per_queue
                         OR enqueue_job.unique_states IS NOT NULL OR enqueue_job.unique_period IS NOT NULL;
    states text[] := COALESCE(enqueue_job.unique_states, ARRAY['scheduled', 'available', 'running', 'completed']);
    stored_key text;
    scope text;
    held bigint;
    formed record;
    period_ms bigint;
    new_id bigint;
    -- debounced, throttled or batched: folded into the waiting job of its key
    mode text := CASE WHEN enqueue_job.debounce IS NOT NULL THEN 'debounced'
                      WHEN enqueue_job.throttle IS NOT NULL THEN 'throttled'
                      WHEN enqueue_job.batch_key IS NOT NULL THEN 'batched' END;
BEGIN
    PERFORM remuda.check_name('kind', enqueue_job.kind, NULL);
    PERFORM remuda.check_name('queue', enqueue_job.queue, job);
    IF enqueue_job.target_worker IS NOT NULL THEN
        PERFORM remuda.check_name('target worker', enqueue_job.target_worker, job);
    END IF;
    IF enqueue_job.args IS NULL THEN
        RAISE EXCEPTION 'job %: args are NULL', job
            USING ERRCODE = bad, HINT = 'pass a JSON value such as ''{}''';
    END IF;
    IF octet_length(enqueue_job.args::text) > max_payload THEN
        RAISE EXCEPTION 'job %: args are % bytes, over the limit of % bytes', job, octet_length(enqueue_job.args::text), max_payload
            USING ERRCODE = bad, HINT = 'store large data elsewhere and pass a reference, or raise the limit (SET remuda.max_payload)';
    END IF;
    IF enqueue_job.priority IS NULL OR enqueue_job.unique_by_args IS NULL OR enqueue_job.unique_per_queue IS NULL THEN
        RAISE EXCEPTION 'job %: priority, unique_by_args and unique_per_queue may not be NULL', job
            USING ERRCODE = bad, HINT = 'leave them out to take their defaults';
    END IF;
    IF enqueue_job.notify IS NOT NULL AND jsonb_typeof(enqueue_job.notify) <> 'null' THEN
        target := remuda.notify_target(enqueue_job.notify, job);
    END IF;
    IF enqueue_job.max_attempts < 1 THEN
        RAISE EXCEPTION 'job %: max_attempts must be at least 1', job USING ERRCODE = bad;
    END IF;
    IF enqueue_job.timeout IS NOT NULL THEN
        IF enqueue_job.timeout <= interval '0' THEN
            RAISE EXCEPTION 'job %: timeout must be more than zero', job USING ERRCODE = bad;
        END IF;
        timeout_ms := greatest(floor(extract(epoch FROM enqueue_job.timeout) * 1000), 1)::bigint;
    END IF;
    IF enqueue_job.delay IS NOT NULL THEN
        IF start IS NOT NULL THEN
            RAISE EXCEPTION 'job %: both run_at and delay are given', job
                USING ERRCODE = bad, HINT = 'give one of them';
        END IF;
        -- the clock, not the transaction's start: a delay counts from the call, as the client's
        start := clock_timestamp() + enqueue_job.delay;
    END IF;
    IF enqueue_job.deadline IS NOT NULL THEN
        IF enqueue_job.deadline <= clock_timestamp() THEN
            RAISE EXCEPTION 'job %: its deadline % has passed: it would expire without running', job, enqueue_job.deadline
                USING ERRCODE = bad, HINT = 'give a later deadline';
        END IF;
        IF start >= enqueue_job.deadline THEN
            RAISE EXCEPTION 'job %: it may not start before % but must start before its deadline %: it would expire without running',
                job, start, enqueue_job.deadline USING ERRCODE = bad;
        END IF;
    END IF;
    IF octet_length(enqueue_job.concurrency_key) NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'job %: the concurrency key must be 1 to 1000 bytes', job USING ERRCODE = bad;
    END IF;
    IF enqueue_job.group_key IS NOT NULL THEN
        PERFORM remuda.check_group('job ' || job, enqueue_job.group_key);
    END IF;
    PERFORM remuda.check_trace('job ' || job, enqueue_job.traceparent, enqueue_job.tracestate);
    enqueue_job.tracestate := NULLIF(enqueue_job.tracestate, '');
    IF octet_length(enqueue_job.target_worker) NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'job %: the target worker must be 1 to 1000 bytes', job USING ERRCODE = bad;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(enqueue_job.requires) c WHERE c IS NULL OR c ~ '^[[:space:]]*$') THEN
        RAISE EXCEPTION 'job %: a required capability is empty', job USING ERRCODE = bad;
    END IF;
    PERFORM remuda.check_formation(job, enqueue_job.debounce, enqueue_job.debounce_max, enqueue_job.throttle,
                                   enqueue_job.throttle_latest, enqueue_job.batch_key, enqueue_job.batch_size,
                                   enqueue_job.batch_wait, is_unique, enqueue_job.unique_states IS NOT NULL
                                   OR enqueue_job.unique_period IS NOT NULL, start IS NOT NULL,
                                   enqueue_job.deadline IS NOT NULL);
    IF mode IN ('debounced', 'throttled') THEN
        -- the key is held while the job waits, and only then: once it runs, the next enqueue
        -- makes a new job
        states := ARRAY['scheduled', 'available'];
    END IF;
    IF is_unique THEN
        IF NOT enqueue_job.unique_by_args AND COALESCE(enqueue_job.unique_key, '') = '' THEN
            RAISE EXCEPTION 'job %: a unique job needs a non-empty key, or uniqueness by args', job USING ERRCODE = bad;
        END IF;
        IF octet_length(enqueue_job.unique_key) > 1000 THEN
            RAISE EXCEPTION 'job %: the unique key is over 1000 bytes', job
                USING ERRCODE = bad, HINT = 'use a digest of it';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(states) s
                   WHERE s IS NULL OR s NOT IN ('scheduled', 'available', 'running', 'completed', 'failed', 'cancelled', 'expired')) THEN
            RAISE EXCEPTION 'job %: unique states % hold an unknown state', job, states
                USING ERRCODE = bad, HINT = 'states are scheduled, available, running, completed, failed, cancelled and expired';
        END IF;
        -- (a debounced or throttled job holds its key only while it waits: its own states)
        IF mode IS NULL AND NOT states @> ARRAY['scheduled', 'available', 'running'] THEN
            RAISE EXCEPTION 'job %: unique states must include scheduled, available and running', job
                USING ERRCODE = bad, HINT = 'add completed, failed, cancelled or expired to keep the key longer';
        END IF;
        stored_key := COALESCE(enqueue_job.unique_key, '');
        IF enqueue_job.unique_period IS NOT NULL THEN
            period_ms := floor(extract(epoch FROM enqueue_job.unique_period) * 1000)::bigint;
            IF period_ms < 1 THEN
                RAISE EXCEPTION 'job %: the unique period must be at least 1 ms', job USING ERRCODE = bad;
            END IF;
            stored_key := stored_key || '@' || (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint / period_ms);
        END IF;
        IF enqueue_job.unique_by_args THEN
            stored_key := remuda.unique_args_key(enqueue_job.kind, enqueue_job.args)
                          || CASE WHEN stored_key = '' THEN '' ELSE '|' || stored_key END;
        END IF;
        scope := CASE WHEN enqueue_job.unique_per_queue THEN enqueue_job.queue END;
        IF mode IN ('debounced', 'throttled') THEN
            PERFORM remuda.check_formed_scope(job, enqueue_job.kind, stored_key, scope, enqueue_job.queue, mode);
        END IF;
    END IF;
    IF mode = 'batched' THEN
        SELECT * INTO formed FROM remuda.enqueue_batched(enqueue_job.kind, enqueue_job.args, enqueue_job.queue,
            enqueue_job.priority, enqueue_job.max_attempts, enqueue_job.deadline, timeout_ms,
            enqueue_job.concurrency_key, enqueue_job.target_worker, enqueue_job.requires, target,
            enqueue_job.batch_key, enqueue_job.batch_size, enqueue_job.batch_wait);
    ELSIF mode = 'throttled' THEN
        SELECT * INTO formed FROM remuda.enqueue_throttled(enqueue_job.kind, enqueue_job.args, enqueue_job.queue,
            enqueue_job.priority, enqueue_job.max_attempts, start, enqueue_job.deadline, timeout_ms,
            stored_key, scope, enqueue_job.concurrency_key, enqueue_job.target_worker, enqueue_job.requires, target,
            enqueue_job.throttle, enqueue_job.throttle_latest);
    ELSIF mode = 'debounced' THEN
        SELECT * INTO formed FROM remuda.enqueue_debounced(enqueue_job.kind, enqueue_job.args, enqueue_job.queue,
            enqueue_job.priority, enqueue_job.max_attempts, enqueue_job.deadline, timeout_ms,
            stored_key, scope, enqueue_job.concurrency_key, enqueue_job.target_worker, enqueue_job.requires, target,
            enqueue_job.debounce, enqueue_job.debounce_max);
    END IF;
    IF mode IS NOT NULL THEN
        -- the enqueue that made the job gives it its group and trace context (the formations'
        -- own inserts leave them out; a job joined keeps those it has)
        IF (enqueue_job.group_key IS NOT NULL OR enqueue_job.traceparent IS NOT NULL)
           AND NOT formed.joined AND NOT formed.duplicate THEN
            UPDATE remuda.jobs_live j
            SET group_key = enqueue_job.group_key, traceparent = enqueue_job.traceparent,
                tracestate = enqueue_job.tracestate
            WHERE j.id = formed.id;
            -- a start tag given as a job without a group is given again in its group (once the
            -- function is there: an upgrade applies this one before the migration it needs)
            IF enqueue_job.group_key IS NOT NULL AND to_regprocedure('remuda.fair_tag_jobs(bigint[])') IS NOT NULL THEN
                UPDATE remuda.jobs_live j SET fair_tag = NULL WHERE j.id = formed.id AND j.fair_tag IS NOT NULL;
                PERFORM remuda.fair_tag_jobs(ARRAY[formed.id]);
            END IF;
        END IF;
        RETURN QUERY SELECT formed.id, formed.joined, formed.duplicate;
        RETURN;
    END IF;
    -- a duplicate whose holder leaves its unique states between the insert and the lookup is
    -- inserted on the next round
    FOR round IN 1..5 LOOP
        -- a key held past its job's end (remuda.unique_finished) makes a duplicate too
        IF is_unique THEN
            new_id := remuda.unique_holder(enqueue_job.kind, scope, stored_key);
            IF new_id IS NOT NULL THEN
                RETURN QUERY SELECT new_id, false, true;
                RETURN;
            END IF;
        END IF;
        INSERT INTO remuda.jobs_live AS j (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms,
                                      args, unique_key, unique_states, unique_queue, concurrency_key,
                                      target_worker, requires, notify, flags, group_key, traceparent, tracestate)
        VALUES (CASE WHEN start > clock_timestamp() THEN 'scheduled'::remuda.job_state ELSE 'available'::remuda.job_state END,
                enqueue_job.queue, enqueue_job.kind, enqueue_job.priority, enqueue_job.max_attempts, COALESCE(start, now()),
                enqueue_job.deadline, timeout_ms, enqueue_job.args, stored_key,
                CASE WHEN is_unique THEN states::remuda.job_state[] END, scope, enqueue_job.concurrency_key,
                enqueue_job.target_worker, enqueue_job.requires, target, CASE WHEN target IS NULL THEN 0 ELSE 4 END,
                enqueue_job.group_key, enqueue_job.traceparent, enqueue_job.tracestate)
        ON CONFLICT (kind, (COALESCE(unique_queue, '')), unique_key)
            WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
        RETURNING j.id INTO new_id;
        IF new_id IS NOT NULL THEN
            -- checked again in a statement of its own, whose snapshot sees a move to the
            -- finished part that committed while the insert waited for it (see
            -- remuda.insert_unique_jobs): the key it kept makes this job a duplicate
            IF is_unique THEN
                held := NULLIF(remuda.unique_finished_holder(enqueue_job.kind, scope, stored_key), new_id);
                IF held IS NOT NULL THEN
                    DELETE FROM remuda.jobs_live j WHERE j.id = new_id;
                    RETURN QUERY SELECT held, false, true;
                    RETURN;
                END IF;
            END IF;
            RETURN QUERY SELECT new_id, false, false;
            RETURN;
        END IF;
        new_id := remuda.unique_holder(enqueue_job.kind, scope, stored_key);
        IF new_id IS NOT NULL THEN
            RETURN QUERY SELECT new_id, false, true;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'job %: a unique job''s key kept changing hands while it was enqueued', job
        USING ERRCODE = 'serialization_failure', HINT = 'try again';
END
$$;
