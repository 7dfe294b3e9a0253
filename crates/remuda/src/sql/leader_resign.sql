-- Give up the lease (graceful shutdown) so another worker takes over without waiting for expiry.
DELETE FROM remuda.leader WHERE name = 'default' AND leader_id = $1
