-- Cancel: the one transition of a job that has not finished (scheduled, available,
-- running) to `cancelled`, for an operator's cancel of one job or many and for a run's
-- stop. Each of the jobs `ids` is locked in id order (with `skip_locked`, one another
-- transaction holds is passed over) and its state read under the lock, so a job a worker
-- claimed a moment ago is seen running and its worker told (`remuda_cancel_run`,
-- "worker_id:job_id:attempt": the run cancelled, so that a late notification never stops a
-- later run of the job on the same worker; and on `remuda_cancel`, "worker_id:job_id", for
-- the workers of earlier releases during an upgrade); its completion is then rejected by the
-- running guard. The result
-- is `message` (CANCELLED), written through the finalization seam.
--
-- A workflow run's job belongs to its run: it is cancelled only when `of_run` is that run
-- (its stop), and a plain job only when `of_run` is NULL. Returns each job found: its
-- state before, whether it was cancelled now, and the run it was left to (`left_to_run`:
-- the run of an unfinished job that belongs to a run other than `of_run`).
CREATE OR REPLACE FUNCTION remuda.cancel_jobs(ids bigint[], of_run bigint, skip_locked boolean, message text)
RETURNS TABLE (id bigint, old_state remuda.job_state, cancelled boolean, left_to_run bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    found remuda.jobs[];
    changed remuda.transition[];
    told text[];
BEGIN
    found := remuda.lock_jobs(ids, skip_locked);
    WITH target AS (
        SELECT f.* FROM unnest(found) f
        WHERE f.state IN ('scheduled', 'available', 'running')
          AND remuda.of_run(f.workflow_id, of_run)
        ORDER BY f.id
    ), done AS (
        SELECT d.*, t.state AS old_state, t.worker_id AS old_worker
        FROM remuda.finish_jobs(
            ARRAY(SELECT t.id FROM target t),
            ARRAY(SELECT 'cancelled'::remuda.job_state FROM target t),
            ARRAY(SELECT jsonb_build_object('err', jsonb_build_object(
                      'code', 'CANCELLED', 'message', message, 'data', NULL)) FROM target t),
            ARRAY(SELECT NULL::jsonb FROM target t), ARRAY(SELECT NULL::int FROM target t),
            ARRAY(SELECT NULL::text FROM target t), ARRAY(SELECT NULL::timestamptz FROM target t)) d
        JOIN target t ON t.id = d.id
    )
    SELECT array_agg(ROW(d.id, d.queue, d.kind, d.flags, d.counted, d.old_state, 'cancelled',
                         d.attempt)::remuda.transition ORDER BY d.id),
           array_agg(d.old_worker || ':' || d.id || ':' || d.attempt)
               FILTER (WHERE d.old_state = 'running' AND d.old_worker IS NOT NULL)
    INTO changed, told
    FROM done d;
    PERFORM pg_notify('remuda_cancel_run', t) FROM unnest(told) t;
    -- (the same without the attempt, which earlier releases read)
    PERFORM pg_notify('remuda_cancel', regexp_replace(t, ':[0-9]+$', '')) FROM unnest(told) t;
    PERFORM remuda.transitioned(changed);
    RETURN QUERY
    SELECT f.id, f.state, f.id = ANY(ARRAY(SELECT c.id FROM unnest(changed) c)),
           CASE WHEN f.state IN ('scheduled', 'available', 'running')
                 AND NOT remuda.of_run(f.workflow_id, of_run) THEN f.workflow_id END
    FROM unnest(found) f ORDER BY f.id;
END
$$;
