-- Run a failed or cancelled run again: every node that did not complete runs again (see
-- wf_rerun), every completed node keeps its result. Returns the state it had.
CREATE OR REPLACE FUNCTION remuda.workflow_retry(w_id bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    old remuda.workflow_state;
BEGIN
    SELECT state INTO old FROM remuda.workflows WHERE id = w_id FOR UPDATE;
    IF NOT FOUND THEN RETURN NULL; END IF;
    IF old NOT IN ('failed', 'cancelled') THEN RETURN old::text; END IF;
    -- a run retried after its deadline gets the whole of it again
    UPDATE remuda.workflows SET state = 'running', finished_at = NULL, error = NULL, output = NULL,
        deadline_at = now() + (definition ->> 'deadline_ms')::bigint * interval '1 millisecond'
    WHERE id = w_id;
    PERFORM remuda.wf_rerun(w_id, ARRAY(SELECT n.node FROM remuda.workflow_nodes n
                                        WHERE n.workflow_id = w_id AND n.state <> 'completed'));
    PERFORM remuda.wf_settle(w_id, '{}', remuda.wf_pending(w_id));
    RETURN old::text;
END
$$;
