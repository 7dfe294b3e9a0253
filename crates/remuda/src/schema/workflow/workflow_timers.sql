-- The timer duty's step, for up to `max_runs` runs: sleeps that are due complete, signals
-- that timed out fail with SIGNAL_TIMEOUT, runs past their deadline fail with
-- DEADLINE_EXCEEDED. Each run in a subtransaction: one that cannot advance is set aside
-- (wf_settle_isolated) and the others go on. Returns how many nodes and runs it ended.
CREATE OR REPLACE FUNCTION remuda.workflow_timers(max_runs integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    w_id bigint;
    due remuda.wf_done[];
    ended integer := 0;
BEGIN
    FOR w_id IN SELECT DISTINCT n.workflow_id FROM remuda.workflow_nodes n
                WHERE n.state = 'running' AND n.wake_at <= now()
                  AND NOT remuda.wf_unstoppable(n.workflow_id)
                ORDER BY n.workflow_id LIMIT max_runs
    LOOP
        PERFORM 1 FROM remuda.workflows WHERE id = w_id AND state IN ('running', 'paused') FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        due := ARRAY(
            SELECT ROW(n.node, NULL,
                       CASE n.type WHEN 'sleep' THEN 'completed' ELSE 'failed' END::remuda.node_state,
                       CASE n.type WHEN 'sleep' THEN '{"ok": null}'::jsonb
                            ELSE jsonb_build_object('err', jsonb_build_object('code', 'SIGNAL_TIMEOUT',
                                 'message', format('no signal %s arrived within %s ms',
                                                   n.spec ->> 'signal', n.spec ->> 'signal_timeout_ms'),
                                 'data', NULL)) END,
                       NULL, NULL)::remuda.wf_done
            FROM remuda.workflow_nodes n
            WHERE n.workflow_id = w_id AND n.state = 'running' AND n.wake_at <= now());
        PERFORM remuda.wf_settle_isolated('workflow_timers', w_id, due, '{}');
        ended := ended + cardinality(due);
    END LOOP;
    FOR w_id IN SELECT w.id FROM remuda.workflows w
                WHERE w.deadline_at IS NOT NULL AND w.state IN ('running', 'paused') AND w.deadline_at <= now()
                  AND NOT remuda.wf_unstoppable(w.id)
                ORDER BY w.deadline_at LIMIT max_runs
    LOOP
        BEGIN
            PERFORM remuda.wf_stop(w_id, 'failed', jsonb_build_object('code', 'DEADLINE_EXCEEDED',
                'message', 'the workflow did not finish before its deadline'));
        EXCEPTION WHEN OTHERS THEN
            IF remuda.is_transient(SQLSTATE) THEN RAISE; END IF;
            PERFORM remuda.record_failure('workflow_timers', 'run ' || w_id || ' (stop)', SQLSTATE, SQLERRM);
        END;
        ended := ended + 1;
    END LOOP;
    RETURN ended;
END
$$;
