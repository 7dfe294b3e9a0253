-- Verification mode's recorder for workflows: a row trigger on remuda.workflows and on
-- remuda.workflow_nodes, installed only while the mode is on (remuda.set_history), that
-- writes each state change of a run (node NULL) or of a node to remuda.run_history.
CREATE OR REPLACE FUNCTION remuda.history_run_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    run_id bigint;
    node text;
BEGIN
    IF TG_TABLE_NAME = 'workflows' THEN
        run_id := CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END;
    ELSE
        run_id := CASE WHEN TG_OP = 'DELETE' THEN OLD.workflow_id ELSE NEW.workflow_id END;
        node := CASE WHEN TG_OP = 'DELETE' THEN OLD.node ELSE NEW.node END;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO remuda.run_history (run_id, node, from_state, to_state)
        VALUES (run_id, node, NULL, NEW.state::text);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO remuda.run_history (run_id, node, from_state, to_state)
        VALUES (run_id, node, OLD.state::text, NULL);
    ELSIF OLD.state IS DISTINCT FROM NEW.state THEN
        INSERT INTO remuda.run_history (run_id, node, from_state, to_state)
        VALUES (run_id, node, OLD.state::text, NEW.state::text);
    END IF;
    RETURN NULL;
END
$$;
