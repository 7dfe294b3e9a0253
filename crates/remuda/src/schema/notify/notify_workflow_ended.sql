-- A workflow run that ends (completed, failed, cancelled) notifies the targets of its spec.
CREATE OR REPLACE FUNCTION remuda.notify_workflow_ended()
RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n jsonb := NEW.definition -> 'notify';
BEGIN
    INSERT INTO remuda.notifications (workflow_id, channel, target, event, body)
    SELECT NEW.id, t.channel, t.target, 'workflow.' || NEW.state,
           jsonb_build_object(
               'type', 'workflow.' || NEW.state,
               'timestamp', remuda.notify_time(now()),
               'data', jsonb_build_object(
                   'id', NEW.id, 'workflow_id', NEW.id, 'name', NEW.name, 'state', NEW.state,
                   'output', NEW.output, 'error', NEW.error, 'parent_id', NEW.parent_id,
                   'created_at', remuda.notify_time(NEW.created_at),
                   'finished_at', remuda.notify_time(COALESCE(NEW.finished_at, now()))))
    FROM (VALUES ('webhook', n ->> 'webhook'), ('email', n ->> 'email')) t(channel, target)
    WHERE length(t.target) > 0 AND n -> 'on' ? NEW.state::text
    ORDER BY t.channel;
    IF FOUND THEN
        PERFORM pg_notify('remuda_outbox', '');
    END IF;
    RETURN NULL;
END
$$;
