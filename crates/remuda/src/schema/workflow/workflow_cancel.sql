-- Cancel a run (see wf_stop). Returns the state it had.
CREATE OR REPLACE FUNCTION remuda.workflow_cancel(w_id bigint)
RETURNS text LANGUAGE sql AS $$
    SELECT remuda.wf_stop(w_id, 'cancelled',
        jsonb_build_object('code', 'CANCELLED', 'message', 'the workflow was cancelled'))
$$;
