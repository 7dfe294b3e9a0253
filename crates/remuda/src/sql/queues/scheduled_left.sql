-- The scheduled jobs of queues $1 and kinds $2: how many, and when the first retry (a job
-- tried at least once) due within $3 ms falls due. `worker --once` waits for such retries
-- before calling its queues drained, and reports the jobs it leaves scheduled. Walks the
-- scheduled index; runs only when a draining worker finds nothing to claim.
SELECT count(*) AS scheduled,
       min(run_at) FILTER (WHERE attempt > 0
                             AND run_at <= now() + $3::bigint * interval '1 millisecond') AS next_retry
FROM remuda.jobs_live
WHERE state = 'scheduled' AND queue = ANY ($1::text[]) AND kind = ANY ($2::text[])
