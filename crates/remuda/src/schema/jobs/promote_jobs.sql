-- Scheduled jobs whose time has come become available, and their queues are woken (one
-- notification per queue, on `remuda_insert`): the one promotion, called by the leader's
-- sweep on the due jobs it locked (promote.sql) and by a worker for its own retries and
-- snoozes due sooner than the sweep's next tick (promote_ids.sql). A job no longer
-- scheduled, or not yet due, is left as it is: a call for a job another promotion took, or
-- that was cancelled meanwhile, changes nothing. Found by primary key, never by a scan of
-- the table, whatever the statistics said when the plan was made; the state compared as
-- text, so that the scheduled jobs' partial index (every due job) is never walked instead.
-- The jobs of queues with fair share wait with their start tags (remuda.fair_tag_jobs).
CREATE OR REPLACE FUNCTION remuda.promote_jobs(ids bigint[]) RETURNS bigint
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    promoted bigint[];
    queues text[];
BEGIN
    WITH p AS (
        -- (a tag a job kept while it was scheduled, as a postponed debounce keeps one, is
        -- stale: given again below)
        UPDATE remuda.jobs_live SET state = 'available', fair_tag = NULL
        WHERE id = ANY(ids) AND state::text = 'scheduled' AND run_at <= now()
        RETURNING id, queue
    )
    SELECT array_agg(p.id), array_agg(DISTINCT p.queue) INTO promoted, queues FROM p;
    IF promoted IS NULL THEN
        RETURN 0;
    END IF;
    IF EXISTS (SELECT 1 FROM remuda.queues q WHERE q.fairness = 'group' AND q.name = ANY(queues)) THEN
        PERFORM remuda.fair_tag_jobs(promoted);
    END IF;
    PERFORM pg_notify('remuda_insert', q) FROM unnest(queues) AS q;
    RETURN cardinality(promoted);
END
$$;
