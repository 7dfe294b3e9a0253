-- The read-only results of a node's context_from nodes.
CREATE OR REPLACE FUNCTION remuda.wf_context(w_id bigint, spec jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT COALESCE((
        SELECT jsonb_object_agg(n.node, n.result)
        FROM remuda.workflow_nodes n
        WHERE n.workflow_id = w_id
          AND n.node IN (SELECT jsonb_array_elements_text(wf_context.spec -> 'context_from'))), '{}'::jsonb)
$$;
