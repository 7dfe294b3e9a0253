-- Take or renew the leader lease for $2 seconds: succeeds (returns a row) when the lease is
-- free, expired, or already held by $1.
INSERT INTO remuda.leader AS l (name, leader_id, elected_at, expires_at)
VALUES ('default', $1, now(), now() + make_interval(secs => $2))
ON CONFLICT (name) DO UPDATE
SET leader_id = EXCLUDED.leader_id,
    expires_at = EXCLUDED.expires_at,
    elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE now() END
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < now()
RETURNING leader_id
