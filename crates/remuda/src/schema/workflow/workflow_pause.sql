-- Pause a run and its running sub-workflows: no node starts and no job of theirs that has
-- not started (a map's elements, a node's job waiting for a worker or a retry) is taken
-- until it is resumed (wf_hold); running jobs finish. The run's jobs are locked before the
-- run, in the order of the statements that lock both. Returns the state it had (NULL: no
-- such run).
CREATE OR REPLACE FUNCTION remuda.workflow_pause(w_id bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    old remuda.workflow_state;
    c bigint;
BEGIN
    old := remuda.wf_lock(w_id, '{scheduled,available}');
    IF old IS NULL THEN RETURN NULL; END IF;
    IF old = 'running' THEN
        UPDATE remuda.workflows SET state = 'paused' WHERE id = w_id;
    END IF;
    IF old IN ('running', 'paused') THEN
        PERFORM remuda.wf_hold(w_id);
        FOR c IN SELECT remuda.wf_children(w_id) LOOP
            PERFORM remuda.workflow_pause(c);
        END LOOP;
    END IF;
    RETURN old::text;
END
$$;
