-- Enqueue from SQL, for every language: remuda.enqueue(kind, args, …) checks a job as the
-- Rust client's NewJob::check does, computes its unique key as the client does, and inserts
-- it (a duplicate of a unique job returns the holder's id). It runs in the caller's
-- transaction, so it works from any driver and from triggers; the statement trigger that
-- wakes workers and enforces max_depth applies as to every insert.
--
-- Errors are raised with SQLSTATE 22023 (invalid_parameter_value), a message naming the job
-- and what was wrong, and a hint saying what to do.

-- The key of a job unique by its args: its kind and the md5 of its args as jsonb (which
-- orders object keys and drops insignificant spaces, so equal documents give equal keys).
CREATE FUNCTION remuda.unique_args_key(kind text, args jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT kind || ':' || md5(args::text)
$$;

-- Refuses a kind, queue or worker name as check_name does: empty or blank, over 200 bytes,
-- or holding a control character.
CREATE FUNCTION remuda.check_name(what text, name text, job text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    prefix text := CASE WHEN job IS NULL THEN '' ELSE 'job ' || job || ': ' END;
BEGIN
    IF name IS NULL OR name ~ '^[[:space:]]*$' THEN
        RAISE EXCEPTION '%the % name is empty', prefix, what
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a name of 1 to 200 bytes';
    END IF;
    IF octet_length(name) > 200 THEN
        RAISE EXCEPTION '%the % name is % bytes, over the limit of 200', prefix, what, octet_length(name)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use a shorter name';
    END IF;
    IF name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION '%the % name % contains a control character', prefix, what, quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'names may not contain tabs, newlines or other control characters';
    END IF;
END
$$;

-- A job's notification target in its stored form ({"webhook", "email", "on"}, outcomes in
-- lifecycle order without repeats, "final" standing for all four), or an error naming what
-- was wrong: as NotifyTarget's validate and stored do.
CREATE FUNCTION remuda.notify_target(target jsonb, job text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    all_outcomes CONSTANT text[] := ARRAY['completed', 'failed', 'cancelled', 'expired'];
    hint CONSTANT text := 'give {"webhook": "https://…", "email": "ops@example.com", "on": ["failed"]} (one channel at least; "on" defaults to every final outcome)';
    extra text;
    webhook text;
    email text;
    names text[];
    outcomes text[];
    authority text;
    port text;
BEGIN
    IF jsonb_typeof(target) <> 'object' THEN
        RAISE EXCEPTION 'job %: notify must be a JSON object', job
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    SELECT k INTO extra FROM jsonb_object_keys(target) k WHERE k NOT IN ('webhook', 'email', 'on') LIMIT 1;
    IF extra IS NOT NULL THEN
        RAISE EXCEPTION 'job %: notify has an unknown field %', job, quote_literal(extra)
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    IF jsonb_typeof(target -> 'webhook') NOT IN ('string', 'null')
       OR jsonb_typeof(target -> 'email') NOT IN ('string', 'null') THEN
        RAISE EXCEPTION 'job %: notify webhook and email must be strings', job
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    webhook := target ->> 'webhook';
    email := target ->> 'email';
    IF webhook IS NULL AND email IS NULL THEN
        RAISE EXCEPTION 'job %: notify: a notification target needs a webhook URL or an email address (or both)', job
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    -- the authority (without user info) must be a host or a bracketed IPv6 address, with an
    -- optional port of at most 65535, as the client's URL parser takes it
    authority := regexp_replace(substring(webhook FROM '^[hH][tT][tT][pP][sS]?://([^/?#]*)'), '^.*@', '');
    port := substring(authority FROM ':([0-9]*)$');
    IF webhook IS NOT NULL AND (octet_length(webhook) > 2048 OR authority IS NULL
       OR authority !~ '^(\[[0-9A-Fa-f:.]+\]|[^:\[\]@[:space:]]+)(:[0-9]*)?$'
       OR (port <> '' AND CASE WHEN length(port) > 5 THEN true ELSE port::integer > 65535 END)) THEN
        RAISE EXCEPTION 'job %: notify: webhook URL % is not an http:// or https:// URL with a host', job, quote_literal(webhook)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'give an http:// or https:// URL such as https://hooks.example.com/remuda';
    END IF;
    IF email IS NOT NULL AND (octet_length(email) > 2048
       OR email !~ '^[^@[:space:][:cntrl:]]+@[^@[:space:][:cntrl:].]+(\.[^@[:space:][:cntrl:].]+)*$') THEN
        RAISE EXCEPTION 'job %: notify: % is not an email address', job, quote_literal(email)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give one such as ops@example.com';
    END IF;
    IF target -> 'on' IS NULL THEN
        outcomes := all_outcomes;
    ELSE
        IF jsonb_typeof(target -> 'on') <> 'array'
           OR EXISTS (SELECT 1 FROM jsonb_array_elements(target -> 'on') e WHERE jsonb_typeof(e) <> 'string') THEN
            RAISE EXCEPTION 'job %: notify "on" must be a list of outcome names', job
                USING ERRCODE = 'invalid_parameter_value', HINT = hint;
        END IF;
        -- as the client reads a list: joined and split on commas, each name trimmed
        names := ARRAY(SELECT regexp_replace(n, '^[[:space:]]+|[[:space:]]+$', '', 'g')
                       FROM jsonb_array_elements_text(target -> 'on') e, unnest(string_to_array(e, ',')) n);
        SELECT n INTO extra FROM unnest(names) n WHERE n <> 'final' AND n <> ALL (all_outcomes) LIMIT 1;
        IF extra IS NOT NULL THEN
            RAISE EXCEPTION 'job %: notify: unknown outcome %', job, quote_literal(extra)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'outcomes are completed, failed, cancelled, expired or final';
        END IF;
        outcomes := ARRAY(SELECT o FROM unnest(all_outcomes) WITH ORDINALITY AS a(o, i)
                          WHERE o = ANY (names) OR 'final' = ANY (names) ORDER BY i);
        IF cardinality(outcomes) = 0 THEN
            RAISE EXCEPTION 'job %: notify: a notification target needs at least one outcome to notify on', job
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'outcomes are completed, failed, cancelled, expired or final';
        END IF;
    END IF;
    RETURN jsonb_build_object('webhook', webhook, 'email', email, 'on', to_jsonb(outcomes));
END
$$;

-- Enqueues one job and returns its id (for a duplicate of a unique job, the id of the job
-- holding the key). Every parameter after args is named and optional:
--   SELECT remuda.enqueue('email', '{"to": "a@example.com"}', queue => 'mail', delay => '5 minutes');
-- run_at or delay: not before then; deadline: expires unless started before it; timeout:
-- of each attempt; unique_key / unique_by_args with unique_states, unique_period and
-- unique_per_queue: as the Rust client's Unique; concurrency_key, target_worker, requires:
-- flow control and routing; notify: a {"webhook", "email", "on"} target. Args are limited to
-- the setting remuda.max_payload (bytes, default 1 MiB), as the client's max_payload, measured
-- on the jsonb's text (which spaces its separators: a little more than compact JSON).
CREATE FUNCTION remuda.enqueue(
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

-- Starts a run of a compiled workflow definition (what `remuda workflow compile SPEC` prints:
-- the spec checked whole, nodes in order with their edges) with input args, and returns its
-- id. With an idempotency key, a second start returns the first run; one with another
-- definition is refused (SQLSTATE 23505). Usable in any transaction and from triggers, as
-- remuda.enqueue is.
CREATE FUNCTION remuda.start_workflow(definition jsonb, args jsonb DEFAULT 'null', key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    hint CONSTANT text := 'pass what `remuda workflow compile SPEC` prints for the spec file (TOML or JSON)';
    started record;
BEGIN
    IF jsonb_typeof(definition) IS DISTINCT FROM 'object' OR jsonb_typeof(definition -> 'name') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'the workflow definition must be a JSON object with a name'
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    IF jsonb_typeof(definition -> 'nodes') IS DISTINCT FROM 'array' OR jsonb_array_length(definition -> 'nodes') = 0
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(definition -> 'nodes') n
                  WHERE jsonb_typeof(n -> 'id') IS DISTINCT FROM 'string'
                     OR jsonb_typeof(n -> 'type') IS DISTINCT FROM 'string'
                     OR jsonb_typeof(n -> 'deps') IS DISTINCT FROM 'array'
                     OR jsonb_typeof(n -> 'dependents') IS DISTINCT FROM 'array') THEN
        RAISE EXCEPTION 'workflow %: the definition is not compiled (its nodes must be a list, each with id, type, deps and dependents)',
            definition ->> 'name' USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    IF key = '' THEN
        RAISE EXCEPTION 'workflow %: the idempotency key is empty', definition ->> 'name'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a key, or NULL for none';
    END IF;
    started := remuda.workflow_start(definition, args, key);
    IF started.drift THEN
        RAISE EXCEPTION 'workflow %: run % was started with key % and another definition', definition ->> 'name', started.id, quote_literal(key)
            USING ERRCODE = 'unique_violation', HINT = 'use a new key, or the definition that run was started with';
    END IF;
    RETURN started.id;
END
$$;
