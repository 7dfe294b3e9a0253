-- One heartbeat for the whole worker (not one per job): its running jobs live as long as it does.
UPDATE remuda.workers SET heartbeat_at = now(), running = $2 WHERE id = $1
