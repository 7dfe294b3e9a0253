-- Release: the one transition of running jobs back to `available` without burning an
-- attempt (the attempt is given back: the run never started, or was stopped before it
-- could end), written by the worker's release of the jobs it stops (sql/jobs/release_jobs.sql)
-- and of the jobs claimed by a statement whose answer it lost (release_orphans.sql). The
-- caller picks the jobs, locks them and passes their places (`places`, the ctids of the
-- locked versions); each is released if it still runs for `worker`. started_at is kept: the
-- job has started once, so its deadline no longer applies (see expire.sql). Written through
-- the finalization seam, which wakes the queues so that another worker takes them. Returns
-- how many were released.
CREATE OR REPLACE FUNCTION remuda.release_jobs(places tid[], worker text)
RETURNS bigint
LANGUAGE plpgsql
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    changed remuda.transition[];
BEGIN
    WITH released AS (
        UPDATE remuda.jobs_live j
        SET state = 'available', attempt = j.attempt - 1, worker_id = NULL
        WHERE j.ctid = ANY(places) AND j.state = 'running' AND j.worker_id = worker
        RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.attempt
    )
    SELECT array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted, 'running', 'available',
                         r.attempt)::remuda.transition)
    INTO changed
    FROM released r;
    PERFORM remuda.transitioned(changed);
    RETURN coalesce(cardinality(changed), 0);
END
$$;
