-- End run `w_id` (locked): `forced` (cancelled, or failed past its deadline) or, when NULL,
-- completed if its success policy holds (any of its cases completed; without one, no node
-- failed or was cancelled), else failed. Records its output and first error, tells waiters
-- (`remuda_workflow`) and passes the summary to the node of its parent run.
CREATE OR REPLACE FUNCTION remuda.wf_finish(w_id bigint, forced jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    wf remuda.workflows;
    ok boolean;
    first_error jsonb;
    summary jsonb;
    final remuda.workflow_state;
BEGIN
    SELECT * INTO wf FROM remuda.workflows WHERE id = w_id;
    IF wf.state NOT IN ('running', 'paused') THEN RETURN; END IF;
    IF jsonb_typeof(wf.definition -> 'success') = 'array' THEN
        ok := EXISTS (
            SELECT 1 FROM jsonb_array_elements(wf.definition -> 'success') c
            WHERE NOT EXISTS (
                SELECT 1 FROM jsonb_array_elements_text(c) x
                WHERE NOT EXISTS (SELECT 1 FROM remuda.workflow_nodes n
                                  WHERE n.workflow_id = w_id AND n.node = x AND n.state = 'completed')));
    ELSE
        ok := NOT EXISTS (SELECT 1 FROM remuda.workflow_nodes n
                          WHERE n.workflow_id = w_id AND n.state IN ('failed', 'cancelled'));
    END IF;
    SELECT jsonb_build_object('node', n.node) || COALESCE(remuda.wf_error(n.result),
               jsonb_build_object('code', upper(n.state::text), 'message', 'node ' || n.node || ' ' || n.state::text))
    INTO first_error
    FROM remuda.workflow_nodes n
    WHERE n.workflow_id = w_id AND n.state IN ('failed', 'cancelled') AND n.reason IS DISTINCT FROM 'cancel'
    ORDER BY n.finished_at, n.position LIMIT 1;
    final := CASE WHEN forced IS NOT NULL THEN (forced ->> 'state')::remuda.workflow_state
                  WHEN ok THEN 'completed' ELSE 'failed' END;
    UPDATE remuda.workflows w
    SET state = final, finished_at = now(),
        error = CASE WHEN forced IS NOT NULL THEN forced -> 'error'
                     WHEN ok THEN NULL ELSE first_error END,
        -- (a bare list: a map's result stored before maps were tagged)
        output = (SELECT CASE WHEN jsonb_typeof(n.result) = 'array' THEN n.result ELSE n.result -> 'ok' END
                  FROM remuda.workflow_nodes n
                  WHERE n.workflow_id = w_id AND n.node = wf.definition ->> 'output' AND n.state = 'completed')
    WHERE w.id = w_id;
    PERFORM pg_notify('remuda_workflow', w_id::text);
    IF wf.parent_id IS NOT NULL THEN
        summary := remuda.wf_summary(w_id);
        PERFORM 1 FROM remuda.workflows p WHERE p.id = wf.parent_id FOR UPDATE;
        -- only the run the parent's node runs now (a child retried on its own, then
        -- replaced by the parent's retry, reports to nobody)
        PERFORM 1 FROM remuda.workflow_nodes n
        WHERE n.workflow_id = wf.parent_id AND n.node = wf.parent_node AND n.child_id = w_id;
        IF NOT FOUND THEN RETURN; END IF;
        PERFORM remuda.wf_settle(wf.parent_id, ARRAY[ROW(wf.parent_node, NULL,
            CASE final WHEN 'completed' THEN 'completed' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END::remuda.node_state,
            CASE WHEN final = 'completed' THEN jsonb_build_object('ok', summary)
                 ELSE jsonb_build_object('err', jsonb_build_object(
                     'code', 'WORKFLOW_' || upper(final::text),
                     'message', format('sub-workflow %s (%s) %s: %s', w_id, wf.name, final,
                                       COALESCE(summary -> 'error' ->> 'message', 'no error recorded')),
                     'data', summary)) END,
            NULL, NULL)::remuda.wf_done], '{}');
    END IF;
END
$$;
