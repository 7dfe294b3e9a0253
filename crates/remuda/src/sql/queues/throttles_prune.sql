-- Delete the throttle windows that hold nothing back any more: past their `next_at`, and
-- whose last job is gone, or has ended and started longer than a period ago (a job that
-- never started holds no window). A window whose job waits or runs stays: the next job of the
-- key starts a period after it. Only for the leader $1 at term $2. Found through
-- throttles_next_idx, the jobs by primary key.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $1 AND term = $2 AND expires_at > now()
    FOR SHARE
), deleted AS (
    DELETE FROM remuda.throttles t
    WHERE EXISTS (SELECT 1 FROM lease)
      AND t.next_at < now()
      AND NOT EXISTS (
          SELECT 1 FROM remuda.jobs j
          WHERE j.id = t.job_id
            AND (j.state NOT IN ('completed', 'failed', 'cancelled', 'expired')
                 OR j.started_at + t.period_ms * interval '1 millisecond' >= now()))
    RETURNING 1
)
SELECT count(*) AS deleted FROM deleted
