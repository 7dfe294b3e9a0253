-- Take or renew the leader lease for $2 seconds: succeeds (returns the lease's term) when the
-- lease is free, expired, already held by $1, or held by a worker that is dead by liveness
-- (silent for longer than its own rescue_after, declared dead, or gone from the registry).
-- The last case lets a killed leader's successor take over, and rescue the dead leader's
-- jobs, about rescue_after after its death instead of waiting out the lease. The term grows
-- whenever the leader changes: the fencing token every leader write checks (lease_guard).
INSERT INTO remuda.leader AS l (name, leader_id, elected_at, expires_at, term)
VALUES ('default', $1, now(), now() + make_interval(secs => $2), 1)
ON CONFLICT (name) DO UPDATE
SET leader_id = EXCLUDED.leader_id,
    expires_at = EXCLUDED.expires_at,
    elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE now() END,
    term = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.term ELSE l.term + 1 END
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < now()
   OR NOT EXISTS (SELECT 1 FROM remuda.workers w
                  WHERE w.id = l.leader_id
                    AND w.heartbeat_at >= now() - w.rescue_after_ms * interval '1 millisecond')
RETURNING term
