-- The scheduled jobs of queues $1 and kinds $2: how many, and when the first retry (a job
-- tried at least once) due within $3 ms falls due; and whether a retry of them is available
-- now (`available_retry`): promoted after the claim that found nothing, it is claimed by
-- one more look. `worker --once` waits for such retries before calling its queues drained,
-- and reports the jobs it leaves scheduled. Walks the scheduled index and the available
-- jobs of the kinds; runs only when a draining worker finds nothing to claim.
SELECT s.scheduled, s.next_retry,
       -- (among the first 1 000 available jobs of the kinds: those left after a claim that
       -- found nothing are the worker cannot take, and a backlog of them is not read whole
       -- at every look)
       EXISTS (SELECT 1 FROM (SELECT a.attempt FROM remuda.jobs_live a
                              WHERE a.state = 'available' AND a.queue = ANY ($1::text[])
                                AND a.kind = ANY ($2::text[])
                              LIMIT 1000) a
               WHERE a.attempt > 0) AS available_retry
FROM (SELECT count(*) AS scheduled,
             min(run_at) FILTER (WHERE attempt > 0
                                   AND run_at <= now() + $3::bigint * interval '1 millisecond') AS next_retry
      FROM remuda.jobs_live
      WHERE state = 'scheduled' AND queue = ANY ($1::text[]) AND kind = ANY ($2::text[])) s
