-- Start a run of compiled definition `def`, or find the one started with idempotency key
-- `idem_key`: returns its id, whether it existed, and whether its definition differs
-- (drift: the caller refuses it). A new run continues the trace context `trace_parent`,
-- `trace_state`, in the fair-share group `group_key`.
-- (the signatures of versions before trace contexts and groups: replaced by this one)
DROP FUNCTION IF EXISTS remuda.workflow_start(jsonb, jsonb, text);
DROP FUNCTION IF EXISTS remuda.workflow_start(jsonb, jsonb, text, text, text);
CREATE OR REPLACE FUNCTION remuda.workflow_start(def jsonb, input jsonb, idem_key text,
                                      trace_parent text DEFAULT NULL, trace_state text DEFAULT NULL,
                                      group_key text DEFAULT NULL,
                                      OUT id bigint, OUT existed boolean, OUT drift boolean)
LANGUAGE plpgsql AS $$
BEGIN
    id := remuda.wf_create(def, input, idem_key, NULL, NULL, trace_parent, trace_state,
                           workflow_start.group_key);
    existed := id IS NULL;
    drift := false;
    IF existed THEN
        SELECT w.id, w.definition_hash <> md5(def::text) INTO id, drift
        FROM remuda.workflows w WHERE w.idempotency_key = idem_key;
    END IF;
END
$$;
