-- The remuda tables whose dead rows are past twice the threshold autovacuum was given for
-- them in the migrations (1 000 + 1% of live rows for the live jobs, 100 for the small
-- ones): autovacuum is off on this server, or falling behind, and the leader vacuums them
-- itself. Also those whose statistics no longer describe them: the rows the planner
-- believes in (pg_class.reltuples, -1 never analysed) differ from the rows there are by more
-- than 1 000 and by more than half the larger count, as when a table that started empty
-- (the live jobs, by design small) first fills, or a backlog drains; a statement planned
-- then would otherwise keep a plan made for the wrong size. Counts are the statistics
-- system's (a second or so behind).
-- `vacuum` says which: a table past its dead rows is vacuumed (and analysed), one whose
-- statistics only are stale is analysed (a sample of its rows, not a pass over the table and
-- every index: a live part of 300 000 jobs took 0.3 s to vacuum in the middle of a drain).
SELECT t.name, t.dead, t.live, t.vacuum FROM (
    SELECT format('%I.%I', s.schemaname, s.relname) AS name, s.n_dead_tup AS dead,
           s.n_live_tup AS live,
           s.n_dead_tup > 2 * (CASE WHEN s.relname = 'jobs_live' THEN 1000 + 0.01 * s.n_live_tup
                                    ELSE 100 END) AS vacuum,
           abs(s.n_live_tup - greatest(c.reltuples, 0))
             > greatest(1000, 0.5 * greatest(s.n_live_tup, c.reltuples)) AS stale
    FROM pg_stat_user_tables s
    JOIN pg_class c ON c.oid = s.relid
    WHERE s.schemaname = 'remuda') t
WHERE t.vacuum OR t.stale
ORDER BY t.dead DESC
