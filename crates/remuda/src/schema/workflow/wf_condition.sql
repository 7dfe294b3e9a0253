-- Whether a declarative condition holds: {"node", "state" | "error_code" | "result_contains"}.
CREATE OR REPLACE FUNCTION remuda.wf_condition(w_id bigint, cond jsonb)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT COALESCE((
        SELECT CASE WHEN cond ? 'state' THEN n.state::text = cond ->> 'state'
                    WHEN cond ? 'error_code' THEN remuda.wf_error(n.result) ->> 'code' = cond ->> 'error_code'
                    WHEN cond ? 'result_contains' THEN (n.result -> 'ok') @> (cond -> 'result_contains')
               END
        FROM remuda.workflow_nodes n WHERE n.workflow_id = w_id AND n.node = cond ->> 'node'), false)
$$;
