-- The sub-workflows a run's running nodes run.
CREATE OR REPLACE FUNCTION remuda.wf_children(w_id bigint)
RETURNS SETOF bigint LANGUAGE sql STABLE AS $$
    SELECT n.child_id FROM remuda.workflow_nodes n
    WHERE n.workflow_id = w_id AND n.type = 'workflow' AND n.state = 'running' AND n.child_id IS NOT NULL
    ORDER BY n.child_id
$$;
