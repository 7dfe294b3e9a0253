-- Lock run `w_id` as its control functions must: first its jobs in `job_states`, in id
-- order (the order the completions that lock both take them: jobs, then the run), then the
-- run. Returns the run's state, NULL when there is no such run.
CREATE OR REPLACE FUNCTION remuda.wf_lock(w_id bigint, job_states remuda.job_state[])
RETURNS remuda.workflow_state LANGUAGE plpgsql AS $$
DECLARE
    st remuda.workflow_state;
BEGIN
    PERFORM 1 FROM remuda.jobs j
    WHERE j.workflow_id = w_id AND j.state = ANY(job_states)
    ORDER BY j.id FOR UPDATE;
    SELECT w.state INTO st FROM remuda.workflows w WHERE w.id = w_id FOR UPDATE;
    RETURN st;
END
$$;
