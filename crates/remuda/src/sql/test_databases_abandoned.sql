-- The test databases (remuda_t_*) whose ownership lock no session holds: their test run is
-- gone. The lock is `pg_advisory_lock(hashtextextended(name, 0))`, taken before the database
-- is created and held for its whole life; pg_locks shows a bigint advisory lock as its high
-- and low 32 bits (classid, objid) with objsubid 1, in whatever database its session is in.
SELECT d.datname
FROM pg_database d
CROSS JOIN LATERAL (SELECT hashtextextended(d.datname, 0) AS k) h
WHERE d.datname LIKE 'remuda\_t\_%'
  AND NOT EXISTS (
      SELECT 1 FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.objsubid = 1
        AND l.classid::text::bigint = (h.k >> 32) & 4294967295
        AND l.objid::text::bigint = h.k & 4294967295)
