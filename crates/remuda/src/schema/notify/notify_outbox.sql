-- The seam's hook: the outbox rows for the jobs of `changed` that reached a final state their
-- targets ask for, one per channel, and one wake-up for the dispatchers (PostgreSQL sends it
-- once per transaction, whatever the number of rows). Statements that finish no job with a
-- target cost one pass over `changed`.
CREATE OR REPLACE FUNCTION remuda.notify_outbox(changed remuda.transition[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    kinds text[] := ARRAY(SELECT d.kind FROM remuda.notification_defaults d);
    wanted bigint[];
BEGIN
    wanted := ARRAY(SELECT c.id FROM unnest(changed) c
                    WHERE remuda.is_final(c.new_state)
                      AND (c.flags & 4 <> 0 OR c.kind = ANY(kinds)));
    IF cardinality(wanted) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO remuda.notifications (job_id, workflow_id, channel, target, event, body)
    SELECT j.id, j.workflow_id, t.channel, t.target, 'job.' || j.state,
           jsonb_build_object(
               'type', 'job.' || j.state,
               'timestamp', remuda.notify_time(now()),
               'data', jsonb_build_object(
                   'id', j.id, 'kind', j.kind, 'queue', j.queue, 'state', j.state,
                   'attempt', j.attempt, 'max_attempts', j.max_attempts,
                   'result', r.tagged -> 'ok', 'error', r.tagged -> 'err',
                   'created_at', remuda.notify_time(j.created_at),
                   'finished_at', remuda.notify_time(COALESCE(j.finished_at, now())),
                   'workflow_id', j.workflow_id, 'node', j.workflow ->> 'node',
                   'index', (j.workflow ->> 'index')::integer)
                   -- the trace the job continues, for the receiver to join (and the header).
                   -- Read from the row as JSON: this function is in place from migration 18,
                   -- before the column (migration 24) on a database being upgraded
                   || jsonb_strip_nulls(jsonb_build_object('traceparent', to_jsonb(j) ->> 'traceparent')))
    FROM remuda.jobs j
    CROSS JOIN LATERAL (SELECT COALESCE(j.notify, (SELECT d.notify FROM remuda.notification_defaults d
                                                   WHERE d.kind = j.kind)) AS n) x
    CROSS JOIN LATERAL (VALUES ('webhook', x.n ->> 'webhook'), ('email', x.n ->> 'email')) t(channel, target)
    CROSS JOIN LATERAL (SELECT remuda.wf_job_result(j.state, j.result, j.errors) AS tagged) r
    WHERE j.id = ANY(wanted)
      AND t.target IS NOT NULL
      AND x.n -> 'on' ? j.state::text
    ORDER BY j.id, t.channel;
    IF FOUND THEN
        PERFORM pg_notify('remuda_outbox', '');
    END IF;
END
$$;
