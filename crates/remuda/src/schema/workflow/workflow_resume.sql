-- Resume a paused run and its sub-workflows: the jobs pause held are due again
-- (wf_release), a failure that paused it (on_error = pause) runs again, and every pending
-- node is decided. Returns the state it had.
CREATE OR REPLACE FUNCTION remuda.workflow_resume(w_id bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    old remuda.workflow_state;
    c bigint;
BEGIN
    old := remuda.wf_lock(w_id, '{scheduled,available}');
    IF old IS NULL THEN RETURN NULL; END IF;
    IF old <> 'paused' THEN RETURN old::text; END IF;
    UPDATE remuda.workflows SET state = 'running' WHERE id = w_id;
    PERFORM remuda.wf_release(w_id);
    FOR c IN SELECT remuda.wf_children(w_id) LOOP
        PERFORM remuda.workflow_resume(c);
    END LOOP;
    PERFORM remuda.wf_rerun(w_id, ARRAY(SELECT n.node FROM remuda.workflow_nodes n
                                        WHERE n.workflow_id = w_id AND n.held));
    PERFORM remuda.wf_settle(w_id, '{}', remuda.wf_pending(w_id));
    RETURN old::text;
END
$$;
