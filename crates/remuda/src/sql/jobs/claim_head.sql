-- How many of the first $3 jobs waiting in queue $1 (in the order the plain claim walks them)
-- are of the kinds $2 a worker runs: `ours` of `looked`. The worker walks by kind (claim.sql's
-- $8) while the head of its queue is mostly of other kinds, which the walk in the queue's
-- order reads and passes over in every claim. Read once a poll interval per queue, under the
-- claims' planner settings (jobs_available_idx in order, never a scan of the table).
SELECT count(*) FILTER (WHERE head.kind = ANY($2::text[])) AS ours, count(*) AS looked
FROM (
    SELECT kind
    FROM remuda.jobs_live
    WHERE state = 'available'
      AND queue = $1
    ORDER BY priority, run_at, id
    LIMIT $3
) head
