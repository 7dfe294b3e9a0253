-- Notifications, newest first: in state $1 (all when NULL), of job $2 and of workflow run $4
-- (any when NULL), at most $3.
SELECT id, job_id, workflow_id, channel, target, event, state::text AS state, attempts,
       next_attempt_at, last_error, created_at, sent_at
FROM remuda.notifications
WHERE ($1::text IS NULL OR state::text = $1)
  AND ($2::bigint IS NULL OR job_id = $2)
  AND ($4::bigint IS NULL OR workflow_id = $4)
ORDER BY id DESC
LIMIT $3
