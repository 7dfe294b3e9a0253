-- Redrive: run again, now, through the finalization seam, each of the jobs $1 that is failed,
-- cancelled or expired (the others are left as they are), as job_retry.sql does for one: one
-- more attempt if it used them all, its error history kept, an expired deadline lifted. A
-- unique job whose key another job holds now is left as it is (it would be a duplicate), and
-- so is a workflow node's job (`remuda workflow retry` runs it again); so are rows another
-- transaction holds. Returns how many.
WITH target AS (
    SELECT x.id, x.state AS old_state FROM remuda.jobs x
    WHERE x.id = ANY($1::bigint[]) AND x.state IN ('failed', 'cancelled', 'expired')
      -- a workflow node's job is run again by its run's retry, which advances the node
      AND remuda.of_run(x.workflow_id, NULL)
      AND (x.unique_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM remuda.jobs h
          WHERE h.unique_key = x.unique_key AND h.kind = x.kind
            AND COALESCE(h.unique_queue, '') = COALESCE(x.unique_queue, '')
            AND h.id <> x.id AND h.state = ANY (h.unique_states)))
    FOR UPDATE SKIP LOCKED
), retried AS (
    UPDATE remuda.jobs j
    SET state = 'available', run_at = now(), started_at = NULL, finished_at = NULL, result = NULL,
        worker_id = NULL, expires_at = NULL, lost_streak = 0,
        max_attempts = CASE WHEN j.max_attempts IS NULL THEN NULL
                            ELSE GREATEST(j.max_attempts, j.attempt + 1) END
    FROM target t
    WHERE j.id = t.id
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.attempt, t.old_state
)
SELECT count(*) AS retried,
       remuda.transitioned(array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted,
                                         r.old_state, 'available', r.attempt)::remuda.transition)) AS seam
FROM retried r
