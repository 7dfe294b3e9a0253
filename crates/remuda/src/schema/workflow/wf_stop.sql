-- Stop a run that has not ended as `final` (cancelled; failed past its deadline) with
-- `error`: its unfinished jobs are cancelled (their workers told), its open nodes cancelled,
-- its sub-workflows stopped. The run's jobs are locked before the run, in the order of the
-- completions that lock both. Returns the state it had.
CREATE OR REPLACE FUNCTION remuda.wf_stop(w_id bigint, final remuda.workflow_state, error jsonb)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    old remuda.workflow_state;
    children bigint[];
    c bigint;
BEGIN
    old := remuda.wf_lock(w_id, '{scheduled,available,running}');
    IF old IS NULL THEN RETURN NULL; END IF;
    IF old NOT IN ('running', 'paused') THEN RETURN old::text; END IF;
    children := ARRAY(SELECT remuda.wf_children(w_id));
    -- the open nodes first: what the sub-workflows and jobs report as they stop is then
    -- passed over
    UPDATE remuda.workflow_nodes SET state = 'cancelled', reason = 'cancel', finished_at = now(),
        wake_at = NULL
    WHERE workflow_id = w_id AND state IN ('pending', 'running');
    UPDATE remuda.workflow_nodes SET held = false WHERE workflow_id = w_id AND held;
    FOREACH c IN ARRAY children LOOP
        PERFORM remuda.wf_stop(c, final, error);
    END LOOP;
    -- read again under their locks: a job started since the first lock (a map's elements)
    -- is found too, and a job a worker claimed meanwhile is seen running, its worker told
    PERFORM remuda.cancel_jobs(ARRAY(SELECT j.id FROM remuda.jobs j
                                     WHERE j.workflow_id = w_id AND j.state IN ('scheduled', 'available', 'running')),
                               w_id, false, 'the job was cancelled with its workflow');
    UPDATE remuda.workflows SET nodes_left = 0 WHERE id = w_id;
    PERFORM remuda.wf_finish(w_id, jsonb_build_object('state', final, 'error', error));
    RETURN old::text;
END
$$;
