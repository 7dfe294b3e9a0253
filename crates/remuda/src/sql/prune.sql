-- Delete up to $3 jobs in final state $1 that are past their age: their queue's own
-- retention for that state, else $2 ms (-1: kept for ever; see remuda.retention_ms). Only
-- for the leader $4 at term $5 when $4 is given (an operator's `remuda prune` passes NULL).
-- The walk of jobs_finished_idx stops at the shortest age any queue has for the state; the
-- literal state list lets every plan use that partial index. Rows another transaction
-- holds are passed over.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $4 AND term = $5 AND expires_at > now()
    FOR SHARE
), shortest AS (
    SELECT min(ms) AS ms FROM (
        SELECT $2::bigint AS ms
        UNION ALL
        SELECT remuda.retention_ms($1::text::remuda.job_state, q, NULL::bigint) FROM remuda.queues q
    ) a
    WHERE ms >= 0
), doomed AS (
    SELECT j.id
    FROM remuda.jobs j
    LEFT JOIN remuda.queues q ON q.name = j.queue
    WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired')
      AND j.state = $1::text::remuda.job_state
      AND j.finished_at < now() - make_interval(secs => (SELECT ms FROM shortest) / 1000.0)
      AND remuda.retention_ms(j.state, q, $2) >= 0
      AND j.finished_at < now() - make_interval(secs => remuda.retention_ms(j.state, q, $2) / 1000.0)
      AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM lease))
    ORDER BY j.finished_at
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
), deleted AS (
    DELETE FROM remuda.jobs j USING doomed d WHERE j.id = d.id
    RETURNING 1
)
SELECT count(*) AS deleted FROM deleted
