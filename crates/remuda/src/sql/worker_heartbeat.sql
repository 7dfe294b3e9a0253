-- One heartbeat for the whole worker (not one per job): its running jobs live as long as it
-- does. No row updated: the worker was declared dead (mark_dead.sql) or forgotten, and must
-- stop its jobs, which are being rescued, before it registers again.
UPDATE remuda.workers SET heartbeat_at = now(), running = $2
WHERE id = $1 AND heartbeat_at > '-infinity'
