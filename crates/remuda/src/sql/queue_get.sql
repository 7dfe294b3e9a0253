-- The settings of the queues $1 (rows only for queues that have settings), for workers and
-- for `remuda queue show`.
SELECT name, paused, max_running, key_limit, rate_limit, rate_period_ms, rate_per, max_depth, updated_at
FROM remuda.queues
WHERE name = ANY($1::text[])
ORDER BY name
