-- Cancel each of the jobs $1 that has not finished (remuda.cancel_jobs: the workers of the
-- running ones are told); the others, rows another transaction holds and workflow nodes'
-- jobs (cancelled with their run) are left as they are. Returns how many.
SELECT count(*) FILTER (WHERE c.cancelled) AS cancelled
FROM remuda.cancel_jobs($1::bigint[], NULL, true, 'the job was cancelled') c
