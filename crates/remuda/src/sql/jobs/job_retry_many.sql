-- Redrive: run again, now, each of the jobs $1 that is failed, cancelled or expired
-- (remuda.revive_jobs, as job_retry.sql does for one). Left as they are: the others, a
-- unique job whose key another job holds now, a workflow's job (its run's retry runs it
-- again) and rows another transaction holds. Returns how many.
SELECT count(*) FILTER (WHERE r.revived) AS retried
FROM remuda.revive_jobs($1::bigint[], NULL, '{failed,cancelled,expired}', true, NULL, false) r
