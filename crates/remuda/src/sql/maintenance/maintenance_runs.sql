-- Each duty's latest run, by duty.
SELECT duty, leader_id, term, started_at, duration_ms, ok, result
FROM remuda.maintenance_runs
ORDER BY duty
