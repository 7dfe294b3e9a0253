-- Give back the jobs running for worker $1 that it does not know it runs (ids other than $2):
-- claimed by a statement whose reply was lost (the connection broke after the commit). The
-- worker runs this after a failed claim, once every outcome it had queued is written, so
-- every job still running for it is either in $2 or an orphan. Released like a shutdown
-- release (the attempt never started), by the one writer of a release (remuda.release_jobs).
-- Scans the table (no index on running jobs): paid only after a claim failed.
SELECT remuda.release_jobs(ARRAY(
    SELECT x.ctid FROM remuda.jobs_live x
    WHERE x.state = 'running' AND x.worker_id = $1 AND x.id <> ALL($2::bigint[])
    FOR UPDATE SKIP LOCKED
), $1) AS released
