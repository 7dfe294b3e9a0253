-- Deliver signal `sig_name` with `payload` to a run: its running signal nodes of that name
-- complete with the payload; one that starts later finds it. Returns how many nodes it
-- completed, -1 when the run has ended (NULL: no such run).
CREATE OR REPLACE FUNCTION remuda.workflow_signal(w_id bigint, sig_name text, payload jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    st remuda.workflow_state;
    waiting text[];
BEGIN
    SELECT state INTO st FROM remuda.workflows WHERE id = w_id FOR UPDATE;
    IF NOT FOUND THEN RETURN NULL; END IF;
    IF st NOT IN ('running', 'paused') THEN RETURN -1; END IF;
    INSERT INTO remuda.workflow_signals (workflow_id, name, data)
    VALUES (w_id, sig_name, COALESCE(payload, 'null'))
    ON CONFLICT (workflow_id, name) DO UPDATE SET data = EXCLUDED.data, received_at = now();
    waiting := ARRAY(SELECT n.node FROM remuda.workflow_nodes n
                     WHERE n.workflow_id = w_id AND n.type = 'signal' AND n.state = 'running'
                       AND n.spec ->> 'signal' = sig_name);
    PERFORM remuda.wf_settle(w_id, ARRAY(
        SELECT ROW(x, NULL, 'completed', jsonb_build_object('ok', COALESCE(payload, 'null')), NULL, NULL)::remuda.wf_done
        FROM unnest(waiting) x), '{}');
    RETURN cardinality(waiting);
END
$$;
