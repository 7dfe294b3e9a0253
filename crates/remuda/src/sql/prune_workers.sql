-- Forget workers that stopped heartbeating more than $1 seconds ago (their jobs were rescued).
DELETE FROM remuda.workers WHERE heartbeat_at < now() - make_interval(secs => $1)
