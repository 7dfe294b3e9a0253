-- The recovery step, for up to `max_runs` runs: advancement that was not written (a node's
-- job ended, or vanished, without the seam: the hook was missing, a row deleted by hand).
-- A running task node whose job is final ends with it (JOB_LOST when it is gone); a map
-- whose elements are all final ends with them; a run with nothing left ends. Returns how
-- many it repaired. Each run in a subtransaction: one that cannot advance is set aside
-- (wf_settle_isolated) and the others go on.
CREATE OR REPLACE FUNCTION remuda.workflow_repair(max_runs integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    w_id bigint;
    lost remuda.wf_done[];
    repaired integer := 0;
BEGIN
    FOR w_id IN SELECT DISTINCT n.workflow_id FROM remuda.workflow_nodes n
                LEFT JOIN remuda.jobs j ON j.id = n.job_id
                WHERE n.state = 'running' AND n.type = 'task' AND (j.id IS NULL OR remuda.is_final(j.state))
                  AND NOT remuda.wf_unstoppable(n.workflow_id)
                ORDER BY n.workflow_id LIMIT max_runs
    LOOP
        PERFORM 1 FROM remuda.workflows WHERE id = w_id AND state IN ('running', 'paused') FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        lost := ARRAY(
            SELECT ROW(n.node, NULL,
                       CASE WHEN j.id IS NULL THEN 'failed'::remuda.node_state ELSE remuda.wf_node_state(j.state) END,
                       CASE WHEN j.id IS NULL THEN jsonb_build_object('err', jsonb_build_object('code', 'JOB_LOST',
                                'message', format('the job %s of node %s no longer exists', n.job_id, n.node), 'data', NULL))
                            ELSE remuda.wf_job_result(j.state, j.result, j.errors) END,
                       n.job_id, NULL)::remuda.wf_done
            FROM remuda.workflow_nodes n LEFT JOIN remuda.jobs j ON j.id = n.job_id
            WHERE n.workflow_id = w_id AND n.state = 'running' AND n.type = 'task'
              AND (j.id IS NULL OR remuda.is_final(j.state)));
        PERFORM remuda.wf_settle_isolated('workflow_repair', w_id, lost, '{}');
        repaired := repaired + cardinality(lost);
    END LOOP;
    FOR w_id IN SELECT DISTINCT n.workflow_id FROM remuda.workflow_nodes n
                WHERE n.state = 'running' AND n.type = 'map' AND n.children_total > 0
                  AND (SELECT count(*) FROM remuda.jobs j
                       WHERE j.workflow_id = n.workflow_id AND j.workflow ->> 'node' = n.node
                         AND j.workflow ? 'index' AND NOT remuda.is_final(j.state)) = 0
                  AND NOT remuda.wf_unstoppable(n.workflow_id)
                ORDER BY n.workflow_id LIMIT max_runs
    LOOP
        PERFORM 1 FROM remuda.workflows WHERE id = w_id AND state IN ('running', 'paused') FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        lost := ARRAY(
            SELECT ROW(n.node, NULL,
                       CASE WHEN r.failed = 0 THEN 'completed' ELSE 'failed' END::remuda.node_state,
                       r.result, NULL, NULL)::remuda.wf_done
            FROM remuda.workflow_nodes n
            CROSS JOIN LATERAL (
                SELECT remuda.wf_map_result(w_id, n.node) AS result,
                       (SELECT count(*) FROM remuda.jobs j WHERE j.workflow_id = w_id
                          AND j.workflow ->> 'node' = n.node AND j.workflow ? 'index'
                          AND j.state <> 'completed') AS failed) r
            WHERE n.workflow_id = w_id AND n.state = 'running' AND n.type = 'map'
              AND n.children_total > 0);
        PERFORM remuda.wf_settle_isolated('workflow_repair', w_id, lost, '{}');
        repaired := repaired + cardinality(lost);
    END LOOP;
    FOR w_id IN SELECT w.id FROM remuda.workflows w
                WHERE w.state IN ('running', 'paused') AND w.nodes_left = 0
                  AND NOT remuda.wf_unstoppable(w.id)
                ORDER BY w.id LIMIT max_runs
    LOOP
        PERFORM 1 FROM remuda.workflows WHERE id = w_id FOR UPDATE;
        PERFORM remuda.wf_settle_isolated('workflow_repair', w_id, '{}', '{}');
        repaired := repaired + 1;
    END LOOP;
    RETURN repaired;
END
$$;
