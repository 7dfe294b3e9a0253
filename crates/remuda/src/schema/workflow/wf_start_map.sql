-- Start map node `n`: one job per element of the list its pointer finds in its upstream's
-- result. Returns its end at once for an empty list or no list.
CREATE OR REPLACE FUNCTION remuda.wf_start_map(wf remuda.workflows, n remuda.workflow_nodes)
RETURNS remuda.wf_done[] LANGUAGE plpgsql AS $$
DECLARE
    upstream jsonb;
    items jsonb;
    base jsonb;
    ctx jsonb;
BEGIN
    SELECT u.result INTO upstream FROM remuda.workflow_nodes u
    WHERE u.workflow_id = wf.id AND u.node = n.spec -> 'map' ->> 'over';
    IF jsonb_typeof(upstream) = 'object' AND upstream ? 'ok' THEN upstream := upstream -> 'ok'; END IF;
    items := upstream #> remuda.wf_pointer(n.spec -> 'map' ->> 'pointer');
    UPDATE remuda.workflow_nodes SET state = 'running', attempt = attempt + 1, started_at = now(),
        finished_at = NULL, result = NULL, reason = NULL, children_total = NULL,
        children_done = 0, children_ok = 0
    WHERE workflow_id = wf.id AND node = n.node AND state = 'pending';
    IF NOT FOUND THEN RETURN '{}'; END IF;
    IF items IS NULL OR jsonb_typeof(items) <> 'array' THEN
        RETURN ARRAY[ROW(n.node, NULL, 'failed', jsonb_build_object('err', jsonb_build_object(
            'code', 'MAP_NOT_A_LIST',
            'message', format('map node %s: %s of node %s is %s, not a list',
                              n.node, COALESCE(NULLIF(n.spec -> 'map' ->> 'pointer', ''), 'the result'),
                              n.spec -> 'map' ->> 'over', COALESCE(jsonb_typeof(items), 'missing')),
            'data', NULL)), NULL, NULL)::remuda.wf_done];
    END IF;
    IF jsonb_array_length(items) = 0 THEN
        RETURN ARRAY[ROW(n.node, NULL, 'completed', '{"ok": []}'::jsonb, NULL, NULL)::remuda.wf_done];
    END IF;
    base := remuda.wf_args(wf.id, wf.input, n.spec);
    ctx := remuda.wf_context(wf.id, n.spec);
    UPDATE remuda.workflow_nodes SET children_total = jsonb_array_length(items)
    WHERE workflow_id = wf.id AND node = n.node;
    INSERT INTO remuda.jobs_live (queue, kind, priority, max_attempts, timeout_ms, expires_at, args,
                             flags, workflow_id, workflow, traceparent, tracestate, group_key)
    SELECT COALESCE(n.spec ->> 'queue', 'default'), n.spec ->> 'kind',
           COALESCE((n.spec ->> 'priority')::integer, 0), (n.spec ->> 'max_attempts')::integer,
           (n.spec ->> 'timeout_ms')::bigint,
           now() + (n.spec ->> 'deadline_ms')::bigint * interval '1 millisecond',
           base || jsonb_build_object('item', e.item, 'index', e.i - 1), 2, wf.id,
           jsonb_build_object('id', wf.id, 'node', n.node, 'index', e.i - 1, 'context', ctx),
           wf.traceparent, wf.tracestate, wf.group_key
    FROM jsonb_array_elements(items) WITH ORDINALITY AS e(item, i);
    RETURN '{}';
END
$$;
