-- The summary of a run, a sub-workflow node's result: state, output, counts, first error.
CREATE OR REPLACE FUNCTION remuda.wf_summary(w_id bigint)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', w.id, 'state', w.state, 'output', w.output, 'error', w.error,
               'completed', (SELECT count(*) FROM remuda.workflow_nodes n WHERE n.workflow_id = w.id AND n.state = 'completed'),
               'failed', (SELECT count(*) FROM remuda.workflow_nodes n WHERE n.workflow_id = w.id AND n.state = 'failed'),
               'skipped', (SELECT count(*) FROM remuda.workflow_nodes n WHERE n.workflow_id = w.id AND n.state = 'skipped'),
               'cancelled', (SELECT count(*) FROM remuda.workflow_nodes n WHERE n.workflow_id = w.id AND n.state = 'cancelled'))
    FROM remuda.workflows w WHERE w.id = w_id
$$;
