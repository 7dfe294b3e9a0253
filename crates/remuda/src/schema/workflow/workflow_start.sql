-- Start a run of compiled definition `def`, or find the one started with idempotency key
-- `idem_key`: returns its id, whether it existed, and whether its definition differs
-- (drift: the caller refuses it). A new run continues the trace context `trace_parent`,
-- `trace_state`.
-- (the signature of versions before trace contexts: replaced by this one)
DROP FUNCTION IF EXISTS remuda.workflow_start(jsonb, jsonb, text);
CREATE OR REPLACE FUNCTION remuda.workflow_start(def jsonb, input jsonb, idem_key text,
                                      trace_parent text DEFAULT NULL, trace_state text DEFAULT NULL,
                                      OUT id bigint, OUT existed boolean, OUT drift boolean)
LANGUAGE plpgsql AS $$
BEGIN
    id := remuda.wf_create(def, input, idem_key, NULL, NULL, trace_parent, trace_state);
    existed := id IS NULL;
    drift := false;
    IF existed THEN
        SELECT w.id, w.definition_hash <> md5(def::text) INTO id, drift
        FROM remuda.workflows w WHERE w.idempotency_key = idem_key;
    END IF;
END
$$;
