-- A job's notification target in its stored form ({"webhook", "email", "on"}, outcomes in
-- lifecycle order without repeats, "final" standing for all four), or an error naming what
-- was wrong: as NotifyTarget's validate and stored do.
CREATE OR REPLACE FUNCTION remuda.notify_target(target jsonb, job text)
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
