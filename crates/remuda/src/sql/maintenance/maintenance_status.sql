-- Who leads maintenance (no row: nobody ever did), since when, at which term, and whether
-- the lease is current (a leader that resigned leaves its row with expires_at -infinity,
-- shown as NULL).
SELECT l.leader_id, l.elected_at, l.term, l.expires_at > now() AS current,
       CASE WHEN isfinite(l.expires_at) THEN l.expires_at END AS expires_at
FROM remuda.leader l
WHERE l.name = 'default'
