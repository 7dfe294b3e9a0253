-- The test databases (remuda_t_*) whose ownership lock no session holds: their test run is
-- gone. The lock is `pg_advisory_lock(hashtextextended(name, 0))`, taken before the database
-- is created and held for its whole life; pg_locks shows a bigint advisory lock as its high
-- and low 32 bits (classid, objid) with objsubid 1, in whatever database its session is in.
-- The scratch databases that `demo` and `bench` make beside a test database
-- (`<name>_demo`, `<name>_bench`) live and die with it: they count as owned by its owner.
SELECT d.datname
FROM pg_database d
CROSS JOIN LATERAL (SELECT hashtextextended(regexp_replace(d.datname, '_(demo|bench)$', ''), 0) AS k) h
WHERE d.datname LIKE 'remuda\_t\_%'
  AND NOT EXISTS (
      SELECT 1 FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.objsubid = 1
        AND l.classid::text::bigint = (h.k >> 32) & 4294967295
        AND l.objid::text::bigint = h.k & 4294967295)
