-- Create a run of compiled definition `def` with `input`, under `parent` when it is a
-- sub-workflow, continuing the trace context `trace_parent`, `trace_state` in the fair-share
-- group `group_key` (its node jobs take both), and start its roots. Returns its id.
-- (the signatures of versions before trace contexts and groups: replaced by this one)
DROP FUNCTION IF EXISTS remuda.wf_create(jsonb, jsonb, text, bigint, text);
DROP FUNCTION IF EXISTS remuda.wf_create(jsonb, jsonb, text, bigint, text, text, text);
CREATE OR REPLACE FUNCTION remuda.wf_create(def jsonb, input jsonb, idem_key text, parent bigint, parent_node text,
                                            trace_parent text, trace_state text, group_key text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    w_id bigint;
BEGIN
    INSERT INTO remuda.workflows (name, definition, definition_hash, input, idempotency_key,
                                  parent_id, parent_node, on_error, nodes_left, deadline_at, traceparent, tracestate,
                                  group_key)
    VALUES (def ->> 'name', def, md5(def::text), COALESCE(input, 'null'), idem_key, parent, parent_node,
            COALESCE(def ->> 'on_error', 'fail'), jsonb_array_length(def -> 'nodes'),
            now() + (def ->> 'deadline_ms')::bigint * interval '1 millisecond', trace_parent, trace_state,
            wf_create.group_key)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id INTO w_id;
    IF w_id IS NULL THEN
        RETURN NULL;
    END IF;
    -- the parent's node knows its child before the child starts: a child that ends at once
    -- reports to it
    IF parent IS NOT NULL THEN
        UPDATE remuda.workflow_nodes SET child_id = w_id
        WHERE workflow_id = parent AND node = parent_node;
    END IF;
    INSERT INTO remuda.workflow_nodes (workflow_id, node, position, type, spec, deps, dependents)
    SELECT w_id, e.value ->> 'id', e.i - 1, e.value ->> 'type', e.value,
           ARRAY(SELECT jsonb_array_elements_text(e.value -> 'deps')),
           ARRAY(SELECT jsonb_array_elements_text(e.value -> 'dependents'))
    FROM jsonb_array_elements(def -> 'nodes') WITH ORDINALITY AS e(value, i);
    PERFORM 1 FROM remuda.workflows WHERE id = w_id FOR UPDATE;
    PERFORM remuda.wf_settle(w_id, '{}', ARRAY(
        SELECT n.value ->> 'id' FROM jsonb_array_elements(def -> 'nodes') n
        WHERE jsonb_array_length(n.value -> 'deps') = 0));
    RETURN w_id;
END
$$;
