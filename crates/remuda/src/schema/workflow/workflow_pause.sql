-- Pause a run and its running sub-workflows: no node starts until it is resumed; running
-- nodes finish. Returns the state it had (NULL: no such run).
CREATE OR REPLACE FUNCTION remuda.workflow_pause(w_id bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    old remuda.workflow_state;
    c bigint;
BEGIN
    SELECT state INTO old FROM remuda.workflows WHERE id = w_id FOR UPDATE;
    IF NOT FOUND THEN RETURN NULL; END IF;
    IF old = 'running' THEN
        UPDATE remuda.workflows SET state = 'paused' WHERE id = w_id;
    END IF;
    IF old IN ('running', 'paused') THEN
        FOR c IN SELECT remuda.wf_children(w_id) LOOP
            PERFORM remuda.workflow_pause(c);
        END LOOP;
    END IF;
    RETURN old::text;
END
$$;
