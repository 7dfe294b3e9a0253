-- Cancel each of the jobs $1 that has not finished, through the finalization seam, as
-- job_cancel.sql does for one (the others, and rows another transaction holds, are left as
-- they are); the workers of the running ones are told on `remuda_cancel`. A workflow node's
-- job is left to its run (`remuda workflow cancel`). Returns how many.
WITH target AS (
    SELECT x.id, x.state AS old_state, x.worker_id FROM remuda.jobs x
    WHERE x.id = ANY($1::bigint[]) AND x.state IN ('scheduled', 'available', 'running')
      AND x.workflow_id IS NULL
    FOR UPDATE SKIP LOCKED
), cancelled AS (
    UPDATE remuda.jobs j
    SET state = 'cancelled', finished_at = now(),
        result = jsonb_build_object('err', jsonb_build_object(
            'code', 'CANCELLED', 'message', 'the job was cancelled', 'data', NULL))
    FROM target t
    WHERE j.id = t.id
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, t.old_state, j.attempt, t.worker_id
)
SELECT count(*) AS cancelled,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_cancel', c.worker_id || ':' || c.id)
                              FROM cancelled c
                              WHERE c.old_state = 'running' AND c.worker_id IS NOT NULL) n) AS told,
       remuda.transitioned(array_agg(ROW(c.id, c.queue, c.kind, c.flags, c.counted,
                                         c.old_state, 'cancelled', c.attempt)::remuda.transition)) AS seam
FROM cancelled c
