-- Delete schedule $1 (the jobs it fired stay).
DELETE FROM remuda.schedules WHERE name = $1 RETURNING name
