-- Claim up to $4 available jobs of queue $1 whose kind this worker runs ($2), in priority order,
-- and mark them running for worker $5, in one round trip.
-- The MATERIALIZED CTE is an optimisation fence: LIMIT ... FOR UPDATE SKIP LOCKED is evaluated
-- once, walking jobs_available_idx in order, instead of being re-planned into a join.
-- max_attempts left NULL by an untyped enqueue takes this worker's default for the kind ($3).
WITH picked AS MATERIALIZED (
    SELECT id
    FROM remuda.jobs
    WHERE state = 'available'
      AND queue = $1
      AND kind = ANY($2::text[])
      AND (expires_at IS NULL OR expires_at > now())
    ORDER BY priority, run_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
)
UPDATE remuda.jobs j
SET state = 'running',
    attempt = j.attempt + 1,
    worker_id = $5,
    started_at = now(),
    max_attempts = COALESCE(j.max_attempts,
        (SELECT d.max_attempts FROM unnest($2::text[], $3::int[]) AS d(kind, max_attempts)
         WHERE d.kind = j.kind LIMIT 1))
FROM picked
WHERE j.id = picked.id
RETURNING j.id, j.kind, j.attempt, j.max_attempts, j.timeout_ms, j.args
