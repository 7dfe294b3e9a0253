-- Workers silent for longer than $1 seconds: presumed dead. Cheap (the workers table is
-- small), so the rescuer runs it every round and scans jobs only when it finds some.
SELECT id FROM remuda.workers
WHERE heartbeat_at < now() - make_interval(secs => $1)
