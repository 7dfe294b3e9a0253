-- The settings of the queues $1 (rows only for queues that have settings), for workers and
-- for `remuda queue show`.
SELECT name, paused, max_running, key_limit, rate_limit, rate_period_ms, rate_per, rate_burst, max_depth,
       retain_completed_ms, retain_failed_ms, retain_cancelled_ms, retain_expired_ms, fairness, updated_at
FROM remuda.queues
WHERE name = ANY($1::text[])
ORDER BY name
