-- Scheduled jobs whose time has come become available, and their queues are woken (one
-- notification per queue, on `remuda_insert`): the one promotion, called by the leader's
-- sweep on the due jobs it locked (promote.sql) and by a worker for its own retries and
-- snoozes due sooner than the sweep's next tick (promote_ids.sql). A job no longer
-- scheduled, or not yet due, is left as it is: a call for a job another promotion took, or
-- that was cancelled meanwhile, changes nothing. Found by primary key, never by a scan of
-- the table, whatever the statistics said when the plan was made; the state compared as
-- text, so that the scheduled jobs' partial index (every due job) is never walked instead.
CREATE OR REPLACE FUNCTION remuda.promote_jobs(ids bigint[]) RETURNS bigint
LANGUAGE sql SET enable_seqscan = off AS $$
    WITH promoted AS (
        UPDATE remuda.jobs_live SET state = 'available'
        WHERE id = ANY(ids) AND state::text = 'scheduled' AND run_at <= now()
        RETURNING queue
    ), woken AS (
        SELECT pg_notify('remuda_insert', q.queue) FROM (SELECT DISTINCT queue FROM promoted) q
    )
    SELECT count(*) + 0 * (SELECT count(*) FROM woken) FROM promoted
$$;
