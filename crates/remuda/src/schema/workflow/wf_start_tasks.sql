-- Start the task nodes `nodes` of run `wf` (pending, decided to run): one job each, in one
-- statement. PL/pgSQL so that a session keeps the statement's plan (a `LANGUAGE sql` function
-- whose body writes is planned again at every call), and the job ids' sequence is looked up
-- once per statement, not once per node (pg_get_serial_sequence reads the catalog).
CREATE OR REPLACE FUNCTION remuda.wf_start_tasks(wf remuda.workflows, nodes text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH started AS (
        UPDATE remuda.workflow_nodes n
        SET state = 'running', attempt = n.attempt + 1, started_at = now(), finished_at = NULL,
            result = NULL, reason = NULL,
            job_id = nextval((SELECT pg_get_serial_sequence('remuda.jobs_live', 'id'))::regclass)
        WHERE n.workflow_id = wf.id AND n.node = ANY(nodes) AND n.state = 'pending'
        RETURNING n.node, n.spec, n.job_id
    )
    INSERT INTO remuda.jobs_live (id, queue, kind, priority, max_attempts, timeout_ms, expires_at,
                             args, flags, workflow_id, workflow, traceparent, tracestate, group_key)
    SELECT s.job_id, COALESCE(s.spec ->> 'queue', 'default'), s.spec ->> 'kind',
           COALESCE((s.spec ->> 'priority')::integer, 0), (s.spec ->> 'max_attempts')::integer,
           (s.spec ->> 'timeout_ms')::bigint,
           now() + (s.spec ->> 'deadline_ms')::bigint * interval '1 millisecond',
           -- (the calls only for the nodes that take args or context: most take none)
           CASE WHEN s.spec ? 'args_from' THEN remuda.wf_args(wf.id, wf.input, s.spec)
                ELSE COALESCE(s.spec -> 'args', '{}'::jsonb) END,
           2, wf.id,
           jsonb_build_object('id', wf.id, 'node', s.node, 'context',
               CASE WHEN s.spec ? 'context_from' THEN remuda.wf_context(wf.id, s.spec)
                    ELSE '{}'::jsonb END),
           wf.traceparent, wf.tracestate, wf.group_key
    FROM started s;
END
$$;
