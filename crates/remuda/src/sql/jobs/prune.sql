-- Delete up to $3 jobs in final state $1 that are past their age: their queue's own
-- retention for that state, else $2 ms (-1: kept for ever; see remuda.retention_ms). Only
-- for the leader $4 at term $5 when $4 is given (an operator's `remuda prune` passes NULL).
-- Ages of a day or more are kept by dropping whole days (remuda.finished_days_drop): then
-- only the default partition (jobs kept past their day) is walked here; shorter ages are
-- deleted row by row. Each queue is walked on its own in the listing index (state, queue,
-- finished_at), up to its own cutoff, so a row not yet past its age is never read: the queues that have jobs in
-- the state are found by skipping through the index (one probe per queue), not by reading
-- their rows. The literal state list lets every plan use that partial index. Rows another
-- transaction holds are passed over. A workflow node's job is kept while its run exists
-- (runs are pruned by workflow_prune.sql, then their jobs here).
WITH RECURSIVE lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $4 AND term = $5 AND expires_at > now()
    FOR SHARE
), queues_in(queue) AS (
    (SELECT j.queue FROM remuda.jobs j
     WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired')
       AND j.state = $1::text::remuda.job_state
     ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM remuda.jobs j
            WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired')
              AND j.state = $1::text::remuda.job_state AND j.queue > p.queue
            ORDER BY j.queue LIMIT 1)
    FROM queues_in p
    WHERE p.queue IS NOT NULL
), cutoffs AS (
    SELECT i.queue, now() - make_interval(secs => ms / 1000.0) AS before,
           r.ms < 86400000 AS by_row
    FROM queues_in i
    LEFT JOIN remuda.queues q ON q.name = i.queue
    CROSS JOIN LATERAL (SELECT remuda.retention_ms($1::text::remuda.job_state, q, $2::bigint) AS ms) r
    WHERE i.queue IS NOT NULL AND r.ms >= 0
), doomed AS (
    SELECT d.id
    FROM cutoffs c
    CROSS JOIN LATERAL (
        -- an age under a day: row by row wherever the jobs are
        SELECT a.id FROM (SELECT j.id FROM remuda.jobs_finished j
         WHERE c.by_row
           AND j.state IN ('completed', 'failed', 'cancelled', 'expired')
           AND j.state = $1::text::remuda.job_state
           AND j.queue = c.queue
           AND j.finished_at < c.before
           -- a workflow's jobs stay while their run does (a retry reads its map's elements)
           AND (j.workflow_id IS NULL
                OR NOT EXISTS (SELECT 1 FROM remuda.workflows w WHERE w.id = j.workflow_id))
         ORDER BY j.finished_at
         LIMIT $3
         FOR UPDATE SKIP LOCKED) a
        UNION ALL
        -- a day or more: whole days are dropped (remuda.finished_days_drop); only the jobs
        -- kept past their day, or of a day without its partition, go row by row
        SELECT k.id FROM (SELECT j.id FROM remuda.jobs_finished_kept j
         WHERE NOT c.by_row
           AND j.state = $1::text::remuda.job_state
           AND j.queue = c.queue
           AND j.finished_at < c.before
           AND (j.workflow_id IS NULL
                OR NOT EXISTS (SELECT 1 FROM remuda.workflows w WHERE w.id = j.workflow_id))
         ORDER BY j.finished_at
         LIMIT $3
         FOR UPDATE SKIP LOCKED) k
    ) d
    WHERE $4::text IS NULL OR EXISTS (SELECT 1 FROM lease)
    LIMIT $3
), deleted AS (
    -- by primary key from an id array, never a join the planner could make a full scan
    DELETE FROM remuda.jobs j WHERE j.id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING j.id
)
SELECT count(*) AS deleted FROM deleted
