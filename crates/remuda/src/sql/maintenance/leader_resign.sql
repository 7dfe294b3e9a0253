-- Give up the lease (graceful shutdown) so another worker takes over without waiting for expiry.
-- The row stays, expired, so that its term keeps growing with every new leader (a deleted row
-- would start again at term 1 and could hand an old term to a new leader).
UPDATE remuda.leader SET expires_at = '-infinity' WHERE name = 'default' AND leader_id = $1
