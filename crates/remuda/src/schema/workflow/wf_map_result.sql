-- The elements' results of map node `node_id`, in order.
CREATE OR REPLACE FUNCTION remuda.wf_map_result(w_id bigint, node_id text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT COALESCE(jsonb_agg(remuda.wf_job_result(j.state, j.result, j.errors)
                              ORDER BY (j.workflow ->> 'index')::integer), '[]'::jsonb)
    FROM remuda.jobs j
    WHERE j.workflow_id = w_id AND j.workflow ->> 'node' = node_id AND j.workflow ? 'index'
$$;
