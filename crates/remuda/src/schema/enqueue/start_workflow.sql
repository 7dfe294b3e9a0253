-- Starts a run of a compiled workflow definition (what `remuda workflow compile SPEC` prints:
-- the spec checked whole, nodes in order with their edges) with input args, and returns its
-- id. With an idempotency key, a second start returns the first run; one with another
-- definition is refused (SQLSTATE 23505). Usable in any transaction and from triggers, as
-- remuda.enqueue is. A definition that could not run as written is refused, saying why
-- (remuda.wf_check). traceparent, tracestate: the W3C trace context the run continues;
-- group_key: the fair-share group it works in (its node jobs take both).
-- (the signatures of versions before trace contexts and groups: replaced by this one)
DROP FUNCTION IF EXISTS remuda.start_workflow(jsonb, jsonb, text);
DROP FUNCTION IF EXISTS remuda.start_workflow(jsonb, jsonb, text, text, text);
CREATE OR REPLACE FUNCTION remuda.start_workflow(definition jsonb, args jsonb DEFAULT 'null', key text DEFAULT NULL,
                                                 traceparent text DEFAULT NULL, tracestate text DEFAULT NULL,
                                                 group_key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    started record;
BEGIN
    PERFORM remuda.wf_check(definition, '');
    IF key = '' THEN
        RAISE EXCEPTION 'workflow %: the idempotency key is empty', definition ->> 'name'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a key, or NULL for none';
    END IF;
    PERFORM remuda.check_trace('workflow ' || (definition ->> 'name'), start_workflow.traceparent, start_workflow.tracestate);
    IF start_workflow.group_key IS NOT NULL THEN
        PERFORM remuda.check_group('workflow ' || (definition ->> 'name'), start_workflow.group_key);
    END IF;
    started := remuda.workflow_start(definition, args, key, start_workflow.traceparent,
                                     NULLIF(start_workflow.tracestate, ''), start_workflow.group_key);
    IF started.drift THEN
        RAISE EXCEPTION 'workflow %: run % was started with key % and another definition', definition ->> 'name', started.id, quote_literal(key)
            USING ERRCODE = 'unique_violation', HINT = 'use a new key, or the definition that run was started with';
    END IF;
    RETURN started.id;
END
$$;
