-- How many of the successes $1 (attempts $2, claim times $3) of worker $4 are written
-- already: completed in that very run. The completer asks before writing a batch of plain
-- successes again after a write whose answer was lost, so that what the lost try wrote is
-- counted once, as written, and not as stale. Only that worker completes a job in that run
-- (a rescue, a cancel or a retry leaves another state, or clears the run).
SELECT count(*) AS completed
FROM unnest($1::bigint[], $2::int[], $3::timestamptz[]) AS u(id, attempt, started_at)
JOIN remuda.jobs j ON j.id = u.id
WHERE j.state::text = 'completed' AND j.worker_id = $4
  AND j.attempt = u.attempt AND j.started_at = u.started_at
