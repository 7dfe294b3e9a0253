-- The remuda tables whose dead rows are past twice the threshold autovacuum was given for
-- them in the migrations (1 000 + 1% of live rows for the job table, 100 for the small
-- ones): autovacuum is off on this server, or falling behind, and the leader vacuums them
-- itself. Counts are the statistics system's (a second or so behind).
SELECT format('%I.%I', s.schemaname, s.relname) AS name, s.n_dead_tup AS dead, s.n_live_tup AS live
FROM pg_stat_user_tables s
WHERE s.schemaname = 'remuda'
  AND s.n_dead_tup > 2 * (CASE WHEN s.relname = 'jobs_live' THEN 1000 + 0.01 * s.n_live_tup ELSE 100 END)
ORDER BY s.n_dead_tup DESC
