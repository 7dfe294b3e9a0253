-- A node's final state for its job's.
CREATE OR REPLACE FUNCTION remuda.wf_node_state(s remuda.job_state)
RETURNS remuda.node_state LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE s WHEN 'completed' THEN 'completed'::remuda.node_state
                  WHEN 'cancelled' THEN 'cancelled'::remuda.node_state
                  ELSE 'failed'::remuda.node_state END
$$;
