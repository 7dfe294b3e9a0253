-- The seam: what follows the state changes of `changed`, written in their transaction.
-- * waiters of awaited jobs that reached a final state hear `remuda_done` (the job id);
-- * jobs that became available in a queue with fair share are given their start tags;
-- * workers hear `remuda_insert` (the queue) for jobs that became available, and for
--   counted jobs that stopped running (room freed in a limited queue);
-- * each registered hook runs with the rows. A hook that fails for a reason that is not a
--   conflict (remuda.is_transient) runs again row by row, each in a subtransaction: the rows
--   it fails for are recorded in remuda.failures and the others go on, so one job's bad
--   extra work (a workflow node that cannot start) never holds back the statement's other
--   jobs, nor the jobs of the statements after it.
-- PostgreSQL sends each distinct (channel, payload) once per transaction. Returns how many
-- rows it was given. Strict: a statement that changed nothing calls it with NULL and it does
-- nothing.
CREATE OR REPLACE FUNCTION remuda.transitioned(changed remuda.transition[])
RETURNS integer LANGUAGE plpgsql STRICT AS $$
DECLARE
    hook regprocedure;
    one remuda.transition;
    err_state text;
    err_message text;
    waiting bigint[];
BEGIN
    PERFORM pg_notify('remuda_done', c.id::text)
    FROM unnest(changed) c
    WHERE c.flags & 1 <> 0 AND remuda.is_final(c.new_state);
    -- jobs waiting again (a retry, a release, a revive, a paused run's release) in a queue with
    -- fair share wait with new start tags: a tag kept while a job was held is stale (once the
    -- function is there: an upgrade applies this one before the migration it needs)
    IF EXISTS (SELECT 1 FROM unnest(changed) c JOIN remuda.queues q ON q.name = c.queue
               WHERE c.new_state = 'available' AND q.fairness = 'group')
       AND to_regprocedure('remuda.fair_tag_jobs(bigint[])') IS NOT NULL THEN
        waiting := ARRAY(SELECT c.id FROM unnest(changed) c WHERE c.new_state = 'available');
        UPDATE remuda.jobs_live j SET fair_tag = NULL WHERE j.id = ANY(waiting) AND j.fair_tag IS NOT NULL;
        PERFORM remuda.fair_tag_jobs(waiting);
    END IF;
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
        BEGIN
            EXECUTE format('SELECT %s($1)', hook::regproc) USING changed;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_message = MESSAGE_TEXT;
            IF remuda.is_transient(err_state) THEN RAISE; END IF;
            -- one row's extra work failed: each row on its own, so that it holds back no
            -- other (its state change stands; what its hook would have added is set aside)
            IF cardinality(changed) = 1 THEN
                PERFORM remuda.record_failure(hook::regproc::text, 'job ' || changed[1].id, err_state, err_message);
            ELSE
                FOR one IN SELECT * FROM unnest(changed) c ORDER BY c.id LOOP
                    BEGIN
                        EXECUTE format('SELECT %s($1)', hook::regproc) USING ARRAY[one];
                    EXCEPTION WHEN OTHERS THEN
                        GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_message = MESSAGE_TEXT;
                        IF remuda.is_transient(err_state) THEN RAISE; END IF;
                        PERFORM remuda.record_failure(hook::regproc::text, 'job ' || one.id, err_state, err_message);
                    END;
                END LOOP;
            END IF;
        END;
    END LOOP;
    RETURN cardinality(changed);
END
$$;
