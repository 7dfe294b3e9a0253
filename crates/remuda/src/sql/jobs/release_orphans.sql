-- Give back the jobs running for worker $1 that it does not know it runs (ids other than $2):
-- claimed by a statement whose reply was lost (the connection broke after the commit). The
-- worker runs this after a failed claim, once every outcome it had queued is written, so
-- every job still running for it is either in $2 or an orphan. Released like a shutdown
-- release (the attempt never started), through the finalization seam. Scans the table (no
-- index on running jobs): paid only after a claim failed.
WITH released AS (
    UPDATE remuda.jobs_live j
    SET state = 'available', attempt = j.attempt - 1, worker_id = NULL
    WHERE j.id = ANY(ARRAY(
        SELECT x.id FROM remuda.jobs_live x
        WHERE x.state = 'running' AND x.worker_id = $1 AND x.id <> ALL($2::bigint[])
        FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.attempt
)
SELECT count(*) AS released,
       remuda.transitioned(array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted, 'running',
                                         'available', r.attempt)::remuda.transition)) AS seam
FROM released r
