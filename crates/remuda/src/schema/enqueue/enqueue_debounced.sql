-- A debounced enqueue (see enqueue_job.sql): inserted to start `debounce` from now, or, while
-- a debounced job of this kind and key waits, folded into it — its args replaced by these,
-- its start moved to now + debounce but never past its first enqueue + debounce_max — in one
-- INSERT … ON CONFLICT DO UPDATE, which concurrent enqueues of the key take in turn (the
-- last one's args win, none is lost). A job that moved back from available to scheduled has
-- not started; one that has started holds the key no more, and the next enqueue makes a new
-- job. A job of the key that is not debounced (a unique job of the same key) is a duplicate.
CREATE OR REPLACE FUNCTION remuda.enqueue_debounced(
    kind text, args jsonb, queue text, priority integer, max_attempts integer, deadline timestamptz,
    timeout_ms bigint, key text, scope text, concurrency_key text, target_worker text, requires text[],
    target jsonb, debounce interval, debounce_max interval)
RETURNS TABLE (id bigint, joined boolean, duplicate boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    due timestamptz := clock_timestamp() + enqueue_debounced.debounce;
    first_due timestamptz := LEAST(due, clock_timestamp() + enqueue_debounced.debounce_max);
    new_id bigint;
    was_joined boolean;
    now_available boolean;
BEGIN
    -- a unique job of the key that finished in one of its unique states holds it still
    -- (remuda.unique_finished): this enqueue is its duplicate
    new_id := remuda.unique_finished_holder(enqueue_debounced.kind, enqueue_debounced.scope, enqueue_debounced.key);
    IF new_id IS NOT NULL THEN
        RETURN QUERY SELECT new_id, false, true;
        RETURN;
    END IF;
    FOR round IN 1..5 LOOP
        INSERT INTO remuda.jobs_live AS j (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms,
                                      args, unique_key, unique_states, unique_queue, concurrency_key,
                                      target_worker, requires, notify, flags, formed)
        VALUES (CASE WHEN first_due > clock_timestamp() THEN 'scheduled'::remuda.job_state
                     ELSE 'available'::remuda.job_state END,
                enqueue_debounced.queue, enqueue_debounced.kind, enqueue_debounced.priority,
                enqueue_debounced.max_attempts, first_due, enqueue_debounced.deadline, enqueue_debounced.timeout_ms,
                enqueue_debounced.args, enqueue_debounced.key, '{scheduled,available}', enqueue_debounced.scope,
                enqueue_debounced.concurrency_key, enqueue_debounced.target_worker, enqueue_debounced.requires,
                enqueue_debounced.target, CASE WHEN enqueue_debounced.target IS NULL THEN 0 ELSE 4 END,
                '{"debounced": 1}')
        ON CONFLICT (kind, (COALESCE(unique_queue, '')), unique_key)
            WHERE unique_key IS NOT NULL AND state = ANY (unique_states)
        DO UPDATE SET
            args = EXCLUDED.args,
            run_at = LEAST(due, j.created_at + enqueue_debounced.debounce_max),
            state = CASE WHEN LEAST(due, j.created_at + enqueue_debounced.debounce_max)
                              > clock_timestamp()
                         THEN 'scheduled'::remuda.job_state ELSE 'available'::remuda.job_state END,
            formed = jsonb_build_object('debounced', (j.formed ->> 'debounced')::bigint + 1),
            -- (a job postponed waits for no turn; one due at once takes a new one, below)
            fair_tag = NULL
        WHERE j.formed ? 'debounced'
        RETURNING j.id, j.xmax::text <> '0', j.state = 'available' INTO new_id, was_joined, now_available;
        IF new_id IS NOT NULL THEN
            IF was_joined AND now_available THEN
                -- (a job of a queue with fair share waits with its start tag, once the function is
                -- there: an upgrade applies this one before the migration it needs)
                IF to_regprocedure('remuda.fair_tag_jobs(bigint[])') IS NOT NULL THEN
                    PERFORM remuda.fair_tag_jobs(ARRAY[new_id]);
                END IF;
                PERFORM pg_notify('remuda_insert', enqueue_debounced.queue);
            END IF;
            RETURN QUERY SELECT new_id, was_joined, false;
            RETURN;
        END IF;
        new_id := remuda.unique_holder(enqueue_debounced.kind, enqueue_debounced.scope, enqueue_debounced.key);
        IF new_id IS NOT NULL THEN
            RETURN QUERY SELECT new_id, false, true;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'job %: a debounced job''s key kept changing hands while it was enqueued', enqueue_debounced.kind
        USING ERRCODE = 'serialization_failure', HINT = 'try again';
END
$$;
