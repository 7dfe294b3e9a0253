-- Hold the leader lease of $1 at term $2 for the rest of the transaction (no row: not the
-- leader any more). An election waits for the transaction; a stale leader learns it here.
SELECT 1 AS held FROM remuda.leader
WHERE name = 'default' AND leader_id = $1 AND term = $2 AND expires_at > now()
FOR SHARE
