-- A batched enqueue (see enqueue_job.sql): enqueues with one batch key accumulate into one
-- job of the kind, whose args are the list of their args in enqueue order (and `formed`
-- their enqueue times): the first inserts it, to start `batch_wait` later; each next one
-- appends to it while it waits, and the one that brings it to `batch_size` makes it
-- available at once. One INSERT … ON CONFLICT DO UPDATE, which concurrent enqueues of the key
-- take in turn: none is lost, none counted twice. A job holds its batch key only while it
-- collects (scheduled): once full or due, the next enqueue starts a new batch. The key is
-- stored as `batch:KEY`, apart from unique keys. An item joins a batch only while the
-- batch's args stay within the args limit (remuda.max_payload, as each item's): one that
-- would take them past it closes the batch, which runs at once with what it holds, and
-- starts the next one (the append is refused by the upsert's condition, which still locks
-- the waiting batch, so no other enqueue of the key comes between).
CREATE OR REPLACE FUNCTION remuda.enqueue_batched(
    kind text, args jsonb, queue text, priority integer, max_attempts integer, deadline timestamptz,
    timeout_ms bigint, concurrency_key text, target_worker text, requires text[], target jsonb,
    batch_key text, batch_size integer, batch_wait interval)
RETURNS TABLE (id bigint, joined boolean, duplicate boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    at jsonb := jsonb_build_array(to_jsonb(clock_timestamp()));
    full_at_once boolean := enqueue_batched.batch_size <= 1;
    max_payload bigint := COALESCE(NULLIF(current_setting('remuda.max_payload', true), '')::bigint, 1048576);
    new_id bigint;
    was_joined boolean;
    now_available boolean;
    closed bigint;
    -- the queue of the batch the item joined or closed (a batch is the kind's and key's, in
    -- the queue its first item named): its workers are the ones to wake
    batch_queue text;
BEGIN
    -- (twice at most: a batch the item does not fit in is closed, and the item starts the next)
    FOR attempt IN 1..2 LOOP
        INSERT INTO remuda.jobs_live AS j (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms,
                                      args, unique_key, unique_states, concurrency_key,
                                      target_worker, requires, notify, flags, formed)
        VALUES (CASE WHEN full_at_once THEN 'available'::remuda.job_state ELSE 'scheduled'::remuda.job_state END,
                enqueue_batched.queue, enqueue_batched.kind, enqueue_batched.priority, enqueue_batched.max_attempts,
                CASE WHEN full_at_once THEN now() ELSE clock_timestamp() + enqueue_batched.batch_wait END,
                enqueue_batched.deadline, enqueue_batched.timeout_ms, jsonb_build_array(enqueue_batched.args),
                'batch:' || enqueue_batched.batch_key, '{scheduled}', enqueue_batched.concurrency_key,
                enqueue_batched.target_worker, enqueue_batched.requires, enqueue_batched.target,
                CASE WHEN enqueue_batched.target IS NULL THEN 0 ELSE 4 END,
                jsonb_build_object('batched', 1, 'enqueued_at', at))
        ON CONFLICT (kind, (COALESCE(unique_queue, '')), unique_key)
            WHERE unique_key IS NOT NULL AND state = ANY (unique_states)
        DO UPDATE SET
            args = j.args || EXCLUDED.args,
            formed = jsonb_build_object('batched', (j.formed ->> 'batched')::bigint + 1,
                                        'enqueued_at', (j.formed -> 'enqueued_at') || at),
            state = CASE WHEN (j.formed ->> 'batched')::bigint + 1 >= enqueue_batched.batch_size
                         THEN 'available'::remuda.job_state ELSE j.state END,
            run_at = CASE WHEN (j.formed ->> 'batched')::bigint + 1 >= enqueue_batched.batch_size
                          THEN now() ELSE j.run_at END
        WHERE j.formed ? 'batched'
          AND octet_length((j.args || EXCLUDED.args)::text) <= max_payload
        RETURNING j.id, j.xmax::text <> '0', j.state = 'available', j.queue
            INTO new_id, was_joined, now_available, batch_queue;
        EXIT WHEN new_id IS NOT NULL;
        -- the key's waiting job, locked by the conflict: a batch this item does not fit in
        -- closes and runs now with what it holds (as a full one does); anything else holds
        -- the key
        UPDATE remuda.jobs_live j SET state = 'available', run_at = now()
        WHERE j.kind = enqueue_batched.kind AND j.unique_queue IS NULL
          AND j.unique_key = 'batch:' || enqueue_batched.batch_key
          AND j.state = 'scheduled' AND j.formed ? 'batched'
        RETURNING j.id, j.queue INTO closed, batch_queue;
        EXIT WHEN closed IS NULL;
        PERFORM remuda.batch_ready(closed, batch_queue);
    END LOOP;
    IF new_id IS NULL THEN
        RAISE EXCEPTION 'job %: batch key % is held by a job that is not a batch', enqueue_batched.kind, enqueue_batched.batch_key
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use another batch key';
    END IF;
    IF was_joined AND now_available THEN
        PERFORM remuda.batch_ready(new_id, batch_queue);
    END IF;
    RETURN QUERY SELECT new_id, was_joined, false;
END
$$;
