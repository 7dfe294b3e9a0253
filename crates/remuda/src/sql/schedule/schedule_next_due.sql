-- When the next schedule falls due (NULL: none), and the database's clock.
SELECT (SELECT min(next_run_at) FROM remuda.schedules WHERE NOT paused) AS next_run_at,
       now() AS now
