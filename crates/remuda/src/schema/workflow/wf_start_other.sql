-- Start a node that is not a task or a map. Returns its end when it ends at once (a sleep
-- of zero, a signal already received).
CREATE OR REPLACE FUNCTION remuda.wf_start_other(wf remuda.workflows, n remuda.workflow_nodes)
RETURNS remuda.wf_done[] LANGUAGE plpgsql AS $$
DECLARE
    sig jsonb;
BEGIN
    IF n.type = 'map' THEN
        RETURN remuda.wf_start_map(wf, n);
    END IF;
    UPDATE remuda.workflow_nodes SET state = 'running', attempt = attempt + 1, started_at = now(),
        finished_at = NULL, result = NULL, reason = NULL,
        wake_at = CASE n.type
            WHEN 'sleep' THEN now() + (n.spec ->> 'sleep_ms')::bigint * interval '1 millisecond'
            WHEN 'signal' THEN now() + (n.spec ->> 'signal_timeout_ms')::bigint * interval '1 millisecond'
        END
    WHERE workflow_id = wf.id AND node = n.node AND state = 'pending';
    IF NOT FOUND THEN RETURN '{}'; END IF;
    IF n.type = 'sleep' AND (n.spec ->> 'sleep_ms')::bigint <= 0 THEN
        RETURN ARRAY[ROW(n.node, NULL, 'completed', '{"ok": null}'::jsonb, NULL, NULL)::remuda.wf_done];
    ELSIF n.type = 'signal' THEN
        SELECT s.data INTO sig FROM remuda.workflow_signals s
        WHERE s.workflow_id = wf.id AND s.name = n.spec ->> 'signal';
        IF FOUND THEN
            RETURN ARRAY[ROW(n.node, NULL, 'completed', jsonb_build_object('ok', sig), NULL, NULL)::remuda.wf_done];
        END IF;
    ELSIF n.type = 'workflow' THEN
        PERFORM remuda.wf_create(n.spec -> 'workflow', remuda.wf_args(wf.id, wf.input, n.spec),
                                  NULL, wf.id, n.node, wf.traceparent, wf.tracestate, wf.group_key);
    END IF;
    RETURN '{}';
END
$$;
