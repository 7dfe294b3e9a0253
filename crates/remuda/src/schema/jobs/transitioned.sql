-- The seam: what follows the state changes of `changed`, written in their transaction.
-- * waiters of awaited jobs that reached a final state hear `remuda_done` (the job id);
-- * workers hear `remuda_insert` (the queue) for jobs that became available, and for
--   counted jobs that stopped running (room freed in a limited queue);
-- * each registered hook runs with the rows.
-- PostgreSQL sends each distinct (channel, payload) once per transaction. Returns how many
-- rows it was given. Strict: a statement that changed nothing calls it with NULL and it does
-- nothing.
CREATE OR REPLACE FUNCTION remuda.transitioned(changed remuda.transition[])
RETURNS integer LANGUAGE plpgsql STRICT AS $$
DECLARE
    hook regprocedure;
BEGIN
    PERFORM pg_notify('remuda_done', c.id::text)
    FROM unnest(changed) c
    WHERE c.flags & 1 <> 0 AND remuda.is_final(c.new_state);
    PERFORM pg_notify('remuda_insert', w.queue)
    FROM (SELECT DISTINCT c.queue FROM unnest(changed) c
          WHERE c.new_state = 'available' OR (c.counted AND c.old_state = 'running')) w;
    FOR hook IN SELECT h.function FROM remuda.transition_hooks h ORDER BY h.name LOOP
        -- a hook whose function was dropped since (regprocedure keeps no dependency) is
        -- passed over, with a warning, rather than failing every state change
        IF to_regprocedure(hook::text) IS NULL THEN
            RAISE WARNING 'remuda: transition hook function % no longer exists; skipped (delete it from remuda.transition_hooks)', hook::oid;
            CONTINUE;
        END IF;
        EXECUTE format('SELECT %s($1)', hook::regproc) USING changed;
    END LOOP;
    RETURN cardinality(changed);
END
$$;
