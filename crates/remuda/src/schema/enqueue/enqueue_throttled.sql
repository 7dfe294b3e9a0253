-- A throttled enqueue (see enqueue_job.sql): at most one job of this kind and key starts per
-- `throttle`. Enqueues of one key take a transaction-scoped advisory lock in turn, so
-- concurrent ones are race-free. While a throttled job of the key waits, the enqueue joins it
-- (its args kept, or with `latest` replaced by these). Otherwise a new job is inserted to
-- start at the end of the key's window: `throttle` after the key's last job started
-- (remuda.throttles names it), at the start it was given when it never started (cancelled,
-- expired), at the window the row recorded when that job is gone, at once when there is none; the row then names the new job. A job of
-- the key that is not throttled (a unique job of the same key) is a duplicate.
CREATE OR REPLACE FUNCTION remuda.enqueue_throttled(
    kind text, args jsonb, queue text, priority integer, max_attempts integer, start timestamptz,
    deadline timestamptz, timeout_ms bigint, key text, scope text, concurrency_key text, target_worker text,
    requires text[], target jsonb, throttle interval, latest boolean)
RETURNS TABLE (id bigint, joined boolean, duplicate boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    waiting record;
    window_row record;
    last_start timestamptz;
    last_run_at timestamptz;
    last_exists boolean;
    due timestamptz := GREATEST(COALESCE(enqueue_throttled.start, clock_timestamp()), clock_timestamp());
    new_id bigint;
BEGIN
    -- a unique job of the key that finished in one of its unique states holds it still
    -- (remuda.unique_finished): this enqueue is its duplicate
    new_id := remuda.unique_finished_holder(enqueue_throttled.kind, enqueue_throttled.scope, enqueue_throttled.key);
    IF new_id IS NOT NULL THEN
        RETURN QUERY SELECT new_id, false, true;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(
        'remuda.throttle' || chr(1) || enqueue_throttled.kind || chr(1) || COALESCE(enqueue_throttled.scope, '')
        || chr(1) || enqueue_throttled.key, 0));
    SELECT h.id, h.formed INTO waiting FROM remuda.jobs_live h
    WHERE h.kind = enqueue_throttled.kind AND COALESCE(h.unique_queue, '') = COALESCE(enqueue_throttled.scope, '')
      AND h.unique_key = enqueue_throttled.key AND h.state = ANY (h.unique_states)
    FOR UPDATE;
    IF waiting.id IS NOT NULL THEN
        IF NOT waiting.formed ? 'throttled' THEN
            RETURN QUERY SELECT waiting.id, false, true;
            RETURN;
        END IF;
        UPDATE remuda.jobs_live j
        SET args = CASE WHEN enqueue_throttled.latest THEN enqueue_throttled.args ELSE j.args END,
            formed = jsonb_build_object('throttled', (j.formed ->> 'throttled')::bigint + 1)
        WHERE j.id = waiting.id;
        RETURN QUERY SELECT waiting.id, true, false;
        RETURN;
    END IF;
    SELECT t.job_id, t.next_at INTO window_row FROM remuda.throttles t
    WHERE t.kind = enqueue_throttled.kind AND t.scope = COALESCE(enqueue_throttled.scope, '')
      AND t.key = enqueue_throttled.key;
    IF window_row.job_id IS NOT NULL THEN
        SELECT true, j.started_at, j.run_at INTO last_exists, last_start, last_run_at
        FROM remuda.jobs j WHERE j.id = window_row.job_id;
        -- the last job's start, else (it never started: cancelled, expired) the start it was
        -- given, which the window before it set; a job gone, the window the row recorded
        due := GREATEST(due, CASE WHEN last_start IS NOT NULL THEN last_start + enqueue_throttled.throttle
                                  WHEN last_exists THEN last_run_at
                                  ELSE window_row.next_at END);
    END IF;
    IF due >= enqueue_throttled.deadline THEN
        RAISE EXCEPTION 'job %: its throttle lets it start at % at the soonest, after its deadline %: it would expire without running',
            enqueue_throttled.kind, due, enqueue_throttled.deadline
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a later deadline, or none';
    END IF;
    INSERT INTO remuda.jobs_live AS j (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms,
                                  args, unique_key, unique_states, unique_queue, concurrency_key,
                                  target_worker, requires, notify, flags, formed)
    VALUES (CASE WHEN due > clock_timestamp() THEN 'scheduled'::remuda.job_state ELSE 'available'::remuda.job_state END,
            enqueue_throttled.queue, enqueue_throttled.kind, enqueue_throttled.priority,
            enqueue_throttled.max_attempts, due, enqueue_throttled.deadline, enqueue_throttled.timeout_ms,
            enqueue_throttled.args, enqueue_throttled.key, '{scheduled,available}', enqueue_throttled.scope,
            enqueue_throttled.concurrency_key, enqueue_throttled.target_worker, enqueue_throttled.requires,
            enqueue_throttled.target, CASE WHEN enqueue_throttled.target IS NULL THEN 0 ELSE 4 END,
            '{"throttled": 1}')
    ON CONFLICT (kind, (COALESCE(unique_queue, '')), unique_key)
        WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
    RETURNING j.id INTO new_id;
    IF new_id IS NULL THEN
        -- another job holds the key in a state of its own (a unique job that runs)
        new_id := remuda.unique_holder(enqueue_throttled.kind, enqueue_throttled.scope, enqueue_throttled.key);
        IF new_id IS NULL THEN
            RAISE EXCEPTION 'job %: a throttled job''s key changed hands while it was enqueued', enqueue_throttled.kind
                USING ERRCODE = 'serialization_failure', HINT = 'try again';
        END IF;
        RETURN QUERY SELECT new_id, false, true;
        RETURN;
    END IF;
    INSERT INTO remuda.throttles AS t (kind, scope, key, job_id, period_ms, next_at)
    VALUES (enqueue_throttled.kind, COALESCE(enqueue_throttled.scope, ''), enqueue_throttled.key, new_id,
            greatest(floor(extract(epoch FROM enqueue_throttled.throttle) * 1000), 1)::bigint,
            due + enqueue_throttled.throttle)
    ON CONFLICT (kind, scope, key) DO UPDATE
        SET job_id = EXCLUDED.job_id, period_ms = EXCLUDED.period_ms, next_at = EXCLUDED.next_at;
    RETURN QUERY SELECT new_id, false, false;
END
$$;
