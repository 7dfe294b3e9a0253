-- Record the latest runs of the duties $1 (started $2, lasting $3 ms, ok $4, what they did
-- or their error $5), by the leader $6 at term $7 while it holds the lease.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $6 AND term = $7 AND expires_at > now()
    FOR SHARE
)
INSERT INTO remuda.maintenance_runs AS m (duty, leader_id, term, started_at, duration_ms, ok, result)
SELECT d.duty, $6, $7, d.started_at, d.duration_ms, d.ok, d.result
FROM unnest($1::text[], $2::timestamptz[], $3::float8[], $4::boolean[], $5::text[])
         AS d(duty, started_at, duration_ms, ok, result)
WHERE EXISTS (SELECT 1 FROM lease)
ON CONFLICT (duty) DO UPDATE
SET leader_id = EXCLUDED.leader_id, term = EXCLUDED.term, started_at = EXCLUDED.started_at,
    duration_ms = EXCLUDED.duration_ms, ok = EXCLUDED.ok, result = EXCLUDED.result
