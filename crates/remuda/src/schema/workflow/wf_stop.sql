-- Stop a run that has not ended as `final` (cancelled; failed past its deadline) with
-- `error`: its unfinished jobs are cancelled (their workers told), its open nodes cancelled,
-- its sub-workflows stopped. The run's jobs are locked before the run, in the order of the
-- completions that lock both. Returns the state it had.
CREATE OR REPLACE FUNCTION remuda.wf_stop(w_id bigint, final remuda.workflow_state, error jsonb)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    old remuda.workflow_state;
    children bigint[];
    c bigint;
    told bigint;
    seam integer;
BEGIN
    PERFORM 1 FROM remuda.jobs j
    WHERE j.workflow_id = w_id AND j.state IN ('scheduled', 'available', 'running')
    ORDER BY j.id FOR UPDATE;
    SELECT state INTO old FROM remuda.workflows WHERE id = w_id FOR UPDATE;
    IF NOT FOUND THEN RETURN NULL; END IF;
    IF old NOT IN ('running', 'paused') THEN RETURN old::text; END IF;
    children := ARRAY(SELECT remuda.wf_children(w_id));
    -- the open nodes first: what the sub-workflows and jobs report as they stop is then
    -- passed over
    UPDATE remuda.workflow_nodes SET state = 'cancelled', reason = 'cancel', finished_at = now(),
        wake_at = NULL
    WHERE workflow_id = w_id AND state IN ('pending', 'running');
    UPDATE remuda.workflow_nodes SET held = false WHERE workflow_id = w_id AND held;
    FOREACH c IN ARRAY children LOOP
        PERFORM remuda.wf_stop(c, final, error);
    END LOOP;
    WITH target AS (
        SELECT j.id, j.state AS old_state, j.worker_id FROM remuda.jobs j
        WHERE j.workflow_id = w_id AND j.state IN ('scheduled', 'available', 'running')
    ), cancelled AS (
        UPDATE remuda.jobs j
        SET state = 'cancelled', finished_at = now(),
            result = jsonb_build_object('err', jsonb_build_object(
                'code', 'CANCELLED', 'message', 'the job was cancelled with its workflow', 'data', NULL))
        FROM target t WHERE j.id = t.id
        RETURNING j.id, j.queue, j.kind, j.flags, j.counted, t.old_state, t.worker_id, j.attempt
    )
    SELECT count(pg_notify('remuda_cancel', x.worker_id || ':' || x.id))
               FILTER (WHERE x.old_state = 'running' AND x.worker_id IS NOT NULL),
           remuda.transitioned(array_agg(ROW(x.id, x.queue, x.kind, x.flags, x.counted,
                                             x.old_state, 'cancelled', x.attempt)::remuda.transition))
    INTO told, seam
    FROM cancelled x;
    UPDATE remuda.workflows SET nodes_left = 0 WHERE id = w_id;
    PERFORM remuda.wf_finish(w_id, jsonb_build_object('state', final, 'error', error));
    RETURN old::text;
END
$$;
