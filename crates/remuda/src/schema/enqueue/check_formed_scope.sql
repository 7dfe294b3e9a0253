-- A debounced or throttled enqueue (`mode`) of job `job` whose key is held in queue `queue`
-- by a waiting job formed the same way under the other scope — across queues where this
-- enqueue says per queue (`scope` is the queue), or per queue where it says across queues
-- (`scope` NULL) — is refused: the scope is part of the key, so it would make a second job
-- of the same kind, key and queue beside the first, where one was asked for. Both lookups
-- are by the unique index (kind, scope, key).
CREATE OR REPLACE FUNCTION remuda.check_formed_scope(job text, kind text, key text, scope text, queue text,
                                                     mode text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    other bigint;
BEGIN
    -- enqueues of one kind, queue and key in either scope take turns here, so that two in
    -- different scopes cannot both pass (for the rest of their transaction)
    PERFORM pg_advisory_xact_lock(hashtextextended('remuda formed ' || kind || ' ' || queue || ' ' || key, 0));
    SELECT j.id INTO other FROM remuda.jobs_live j
    WHERE j.kind = check_formed_scope.kind
      AND COALESCE(j.unique_queue, '') = CASE WHEN check_formed_scope.scope IS NULL
                                              THEN check_formed_scope.queue ELSE '' END
      AND j.unique_key = check_formed_scope.key
      AND j.unique_key IS NOT NULL AND j.state = ANY (j.unique_states)
      AND j.queue = check_formed_scope.queue AND j.formed ? mode
    LIMIT 1;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'job %: job % of this kind and key waits in queue % %, %; this enqueue says %',
            job, other, queue, mode,
            CASE WHEN scope IS NULL THEN 'its key held per queue (unique_per_queue)'
                 ELSE 'its key held across queues' END,
            CASE WHEN scope IS NULL THEN 'across queues' ELSE 'per queue (unique_per_queue)' END
            USING ERRCODE = '22023',
                  HINT = 'a key''s scope is part of the key: enqueue it as the waiting job was (with or without unique_per_queue), or give another key';
    END IF;
END
$$;
