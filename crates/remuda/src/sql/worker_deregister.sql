-- A worker that stopped cleanly leaves the registry.
DELETE FROM remuda.workers WHERE id = $1
