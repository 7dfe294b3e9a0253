-- One heartbeat for the whole worker (not one per job): its running jobs live as long as it
-- does. With it, what it reports ($2 running jobs, $3 their ids, $4 completed and $5 failed
-- attempts since it started, $6 processor use in percent of a core, $7 resident bytes). No
-- row updated: the worker was declared dead (mark_dead.sql) or forgotten, and must stop its
-- jobs, which are being rescued, before it registers again.
UPDATE remuda.workers
SET heartbeat_at = now(), running = $2, running_ids = $3, completed = $4, failed = $5,
    cpu_percent = $6, rss_bytes = $7
WHERE id = $1 AND heartbeat_at > '-infinity'
