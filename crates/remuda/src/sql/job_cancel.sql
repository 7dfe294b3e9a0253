-- Cancel a job that has not finished, through the finalization seam (which tells waiters). A
-- running job's worker is told on `remuda_cancel` ("worker_id:job_id") and stops it; its
-- completion is then rejected by the running guard.
-- Returns the state the job had (no row: no such job) and whether it was cancelled now (changed).
WITH target AS (
    SELECT id, state AS old_state, worker_id FROM remuda.jobs WHERE id = $1 FOR UPDATE
), cancelled AS (
    UPDATE remuda.jobs j
    SET state = 'cancelled', finished_at = now(),
        result = jsonb_build_object('err', jsonb_build_object(
            'code', 'CANCELLED', 'message', 'the job was cancelled', 'data', NULL))
    FROM target t
    WHERE j.id = t.id AND t.old_state IN ('scheduled', 'available', 'running')
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, t.old_state, j.attempt
)
SELECT t.old_state::text AS old_state,
       (SELECT count(*) FROM cancelled) AS changed,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_cancel', t.worker_id || ':' || t.id)
                              WHERE t.old_state = 'running' AND t.worker_id IS NOT NULL) c) AS told,
       (SELECT remuda.transitioned(array_agg(ROW(c.id, c.queue, c.kind, c.flags, c.counted,
                                                 c.old_state, 'cancelled', c.attempt)::remuda.transition))
        FROM cancelled c) AS seam
FROM target t
