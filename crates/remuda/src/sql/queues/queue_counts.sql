-- Number of jobs per queue and state, each state counted in its own index rather than the
-- table: the waiting and running states exactly, each final state up to $1 per queue (NULL:
-- all; a count of $1 means "at least $1", flagged `capped`), so that a capped count stays
-- quick with millions of finished jobs. The (state, queue) pairs of the finished jobs are found by skipping through
-- jobs_finished_idx, one probe per pair. With the available count comes when the queue's
-- oldest available job became runnable (its run_at, or when it was enqueued if that was
-- later: a job enqueued to run at a time long past has waited only since its enqueue): how
-- far behind the queue is. Running jobs are counted by
-- scanning the table when uncapped (exact), else from what the workers reported running at
-- their last heartbeat (workers.running_ids, read by primary key: the table has no index on
-- running jobs).
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
SELECT f.queue, f.state::text AS state, c.jobs, COALESCE(c.jobs >= $1, false) AS capped, NULL::timestamptz AS oldest
FROM finished f
CROSS JOIN LATERAL (
    SELECT count(*) AS jobs FROM (
        SELECT 1 FROM remuda.jobs x
        WHERE x.state IN ('completed', 'failed', 'cancelled', 'expired')
          AND x.state = f.state AND x.queue = f.queue
        LIMIT $1) l) c
UNION ALL
SELECT queue, 'available', count(*), false, min(GREATEST(run_at, created_at))
FROM remuda.jobs WHERE state = 'available' GROUP BY queue
UNION ALL
SELECT queue, 'scheduled', count(*), false, NULL FROM remuda.jobs WHERE state = 'scheduled' GROUP BY queue
UNION ALL
SELECT queue, 'running', count(*), false, NULL FROM remuda.jobs
WHERE state = 'running' AND $1::bigint IS NULL GROUP BY queue
UNION ALL
SELECT j.queue, 'running', count(*), false, NULL FROM remuda.jobs j
WHERE j.id = ANY(ARRAY(SELECT unnest(w.running_ids) FROM remuda.workers w))
  AND j.state = 'running' AND $1::bigint IS NOT NULL
GROUP BY j.queue
