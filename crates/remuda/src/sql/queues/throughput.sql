-- Per queue, the jobs that completed and failed within the last $1 milliseconds: each
-- (state, queue) of the finished jobs is found by skipping through jobs_finished_idx (one
-- probe each) and counted from its newest end back to the window's start, so the count reads
-- only the window's index entries.
WITH RECURSIVE finished(state, queue) AS (
    (SELECT state, queue FROM remuda.jobs
     WHERE state IN ('completed', 'failed', 'cancelled', 'expired')
     ORDER BY state, queue LIMIT 1)
  UNION ALL
    SELECT n.state, n.queue FROM finished f
    CROSS JOIN LATERAL (
        SELECT x.state, x.queue FROM remuda.jobs x
        WHERE x.state IN ('completed', 'failed', 'cancelled', 'expired')
          AND (x.state, x.queue) > (f.state, f.queue)
        ORDER BY x.state, x.queue LIMIT 1) n
)
SELECT f.queue, f.state::text AS state, c.jobs
FROM finished f
CROSS JOIN LATERAL (
    SELECT count(*) AS jobs FROM remuda.jobs x
    WHERE x.state IN ('completed', 'failed', 'cancelled', 'expired')
      AND x.state = f.state AND x.queue = f.queue
      AND x.finished_at >= now() - $1::bigint * interval '1 millisecond') c
WHERE f.state IN ('completed', 'failed')
