-- The settings of every queue that has some (for `remuda queues`, which also lists the
-- configured queues that have no jobs).
SELECT name, paused, max_running, key_limit, rate_limit, rate_period_ms, rate_per, rate_burst, max_depth,
       retain_completed_ms, retain_failed_ms, retain_cancelled_ms, retain_expired_ms, fairness, updated_at
FROM remuda.queues
ORDER BY name
