-- The pending nodes of a run, to decide.
CREATE OR REPLACE FUNCTION remuda.wf_pending(w_id bigint)
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY(SELECT n.node FROM remuda.workflow_nodes n
                 WHERE n.workflow_id = w_id AND n.state = 'pending' ORDER BY n.position)
$$;
